<schema name="attrs">
  <module name="pinned" pin="true">always here</module>
  <module name="short" ttl="2.5">short lived</module>
  <module name="fresh" cache="false">computed each time</module>
  <union scaffold="true"><module name="u1">one</module><module name="u2">two</module></union>
</schema>
<prompt schema="attrs"><pinned/><short/><fresh/><u2/></prompt>
