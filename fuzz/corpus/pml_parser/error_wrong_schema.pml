<schema name="s"><module name="a">x</module></schema>
<prompt schema="other"><a/><user><assistant/></user></prompt>
