<schema name="p"><module name="m">a <param name="p" len="8">ph ph</param> b <param name="q" len="4" placeholder="x"/> c</module></schema>
<prompt schema="p"><m p="filled" q=""/></prompt>
