<schema name="e"><!-- a comment --><module name="x">a &lt; b &amp;&amp; c &gt; d &quot;q&quot; &apos;s&apos;<![CDATA[<raw> & text]]></module>&lt;|im_end|&gt;</schema>
<prompt schema="e"><x/>&lt;|im_start|&gt;user</prompt>
