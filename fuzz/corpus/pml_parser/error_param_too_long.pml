<schema name="s"><module name="m"><param name="p" len="2">too long placeholder</param></module></schema>
<prompt schema="s"><m p="way too long argument"/></prompt>
