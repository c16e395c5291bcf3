<schema name="n">intro
  <module name="doc">Document start
    <module name="ch1">Chapter one text.</module>
    <module name="ch2">Chapter two text.<module name="y">deep</module></module>
  </module>
</schema>
<prompt schema="n"><doc>look <ch2><y/></ch2></doc>Q</prompt>
