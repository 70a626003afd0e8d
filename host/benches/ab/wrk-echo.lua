-- A 2026-07-28 stateless `tools/call` of echo, with the headers a client sends, for wrk:
--   chitin serve --no-watch --http 127.0.0.1:18800 --rate-limit 1000000 --insecure-no-token \
--     --components build/components/echo.wasm   (with a workspace outside the repository)
--   wrk -t1 -c16 -d4s --latency -s host/benches/ab/wrk-echo.lua http://127.0.0.1:18800/mcp
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
