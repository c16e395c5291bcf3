<schema name="s"><module name="a">x</module><module name="a">y</module></schema>
