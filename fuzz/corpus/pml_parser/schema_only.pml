<schema name="only">
  root text before
  <module name="m1">one</module>
  root text between
  <module name="m2">two <module name="m3">three</module></module>
  root text after
</schema>
