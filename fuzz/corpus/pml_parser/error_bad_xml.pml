<schema name="s"><module name="a">x</module
<prompt schema="s"><a/>
