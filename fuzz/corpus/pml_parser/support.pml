<schema name="support">
  <system>You answer questions about our products.</system>
  <module name="manual-printer">Printer manual: load paper, then press start.</module>
  <module name="manual-router">Router manual: red light means no uplink.</module>
  <module name="reply">Reply in <parameter name="lang" length="12"/>, briefly.</module>
  <union>
    <module name="tone-formal">Be formal.</module>
    <module name="tone-casual">Be casual.</module>
  </union>
</schema>

<prompt schema="support">
  <manual-router/><reply lang="French"/><tone-casual/>
  <user>My router blinks red. What now?</user>
  <assistant/>
</prompt>
