<schema name="s">
  <system>be nice</system>
  <module name="a">alpha beta gamma</module>
  mid text
  <module name="reply">Reply in <parameter name="lang" length="16">English</parameter> , briefly.</module>
  <union>
    <module name="f">be formal</module>
    <module name="c">be very casual</module>
  </union>
  end
</schema>
<prompt schema="s">
  Question first
  <reply lang="French"/>
  between
  <c/>
  <user>why?</user>
  <assistant/>
</prompt>
