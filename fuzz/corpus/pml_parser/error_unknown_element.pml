<schema name="s"><module name="a">x</module><bogus/></schema>
<prompt schema="s"><nope/></prompt>
