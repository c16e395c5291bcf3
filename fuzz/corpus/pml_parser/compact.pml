<schema name="s"><module name="a">alpha</module><module name="b">beta</module></schema>
<prompt schema="s" layout="compact"><b/><a/>tail</prompt>
