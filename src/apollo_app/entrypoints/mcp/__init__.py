"""Apollo over the Model Context Protocol: tools generated from the action record, resources
for reading entries and entities by reference, over stdio (``apollo mcp``) and streamable
HTTP (``/mcp`` in ``apollo serve``)."""

from .http import EDGE, METADATA_PATH, PATH, McpHttp, http_caller
from .server import ENTITY_TEMPLATE, ENTRY_TEMPLATE, ApolloMcp, entity_uri, entry_uri, may_list
from .stdio import local_caller, serve, stdio_streams
from .tools import Tool, input_schema, mcp_actions, output_schema, tools_of

__all__ = [
    "EDGE",
    "ENTITY_TEMPLATE",
    "ENTRY_TEMPLATE",
    "METADATA_PATH",
    "PATH",
    "ApolloMcp",
    "McpHttp",
    "Tool",
    "entity_uri",
    "entry_uri",
    "http_caller",
    "input_schema",
    "local_caller",
    "may_list",
    "mcp_actions",
    "output_schema",
    "serve",
    "stdio_streams",
    "tools_of",
]
