<schema name="ünï"><module name="café.menu">crème brûlée</module><module name="_a-b.c"><param name="größe" len="6"/></module></schema>
<prompt schema="ünï"><café.menu/><_a-b.c größe="groß"/></prompt>
