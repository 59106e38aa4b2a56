"""What the lanes and the agent both speak, with no domain in it: the model request and
response (`messages`), the tool interface (`tools`: Tool, ToolContext, ToolError, IdField,
the registry) and the format a domain declares its tools in (`domain`: Domain, ToolDecl, the
registry of domains). `context` builds requests and harvests tool results through it; `agent`
calls models and runs tools through it; neither has to import the other for these, and
neither imports a domain.
"""
