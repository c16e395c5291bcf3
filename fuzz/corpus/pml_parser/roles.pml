<schema name="chat">
  <system>System text</system>
  <module name="hist"><user>hi</user><assistant>hello</assistant></module>
  <user/>
</schema>
<prompt schema="chat"><hist/><system/><user>next question</user><assistant/></prompt>
