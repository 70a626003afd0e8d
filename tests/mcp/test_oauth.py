"""chitin as an OAuth 2.1 resource server on Streamable HTTP, against a small issuer this test
runs on loopback over HTTPS (its own CA, its own P-256 signing key, both made here): the
protected-resource metadata, the challenges, and JWT access tokens that are good, for another
audience, expired, too narrow in scope, or signed the wrong way. The good token drives the
official MCP Python SDK in its 2026-07-28 mode."""

import base64
import contextlib
import datetime
import hashlib
import hmac
import ipaddress
import json
import pathlib
import re
import shutil
import ssl
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import httpx2
import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from jwt.algorithms import ECAlgorithm
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from conftest import COMPONENTS, REPO, HttpServer

VERSION = "2026-07-28"
KID = "test-key-1"


def certificate(subject, issuer_name, public_key, signing_key, *, ca):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


class Issuer:
    """An authorization server's public face on https://127.0.0.1:PORT: RFC 8414 metadata and a
    JWK set with one ES256 key; it signs tokens with that key and counts key-set fetches."""

    def __init__(self, directory: pathlib.Path):
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "chitin test CA")])
        ca = certificate(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
        tls_key = ec.generate_private_key(ec.SECP256R1())
        tls_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        tls_cert = certificate(tls_name, ca_name, tls_key.public_key(), ca_key, ca=False)
        self.ca_file = directory / "issuer-ca.pem"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        chain = directory / "issuer-tls.pem"
        chain.write_bytes(
            tls_cert.public_bytes(serialization.Encoding.PEM)
            + tls_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        self.signing_key = ec.generate_private_key(ec.SECP256R1())
        jwk = ECAlgorithm.to_jwk(self.signing_key.public_key(), as_dict=True)
        jwk.update({"kid": KID, "alg": "ES256", "use": "sig"})
        self.jwks = {"keys": [jwk]}
        self.public_pem = self.signing_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.jwks_fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/.well-known/oauth-authorization-server":
                    body = {"issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks"}
                elif self.path == "/jwks":
                    issuer.jwks_fetches += 1
                    body = issuer.jwks
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(chain)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def token(self, audience, scope, *, expires_in=300, kid=KID, **extra):
        now = int(time.time())
        claims = {
            "iss": self.url, "sub": "test-user", "client_id": "test-client", "aud": audience,
            "iat": now, "nbf": now - 5, "exp": now + expires_in, "scope": scope, **extra,
        }
        return jwt.encode(claims, self.signing_key, algorithm="ES256", headers={"kid": kid})

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def oauth():
    """The issuer, and a chitin server taking its tokens (echo: `tools:basic`; read_file and
    the other fs tools: `tools:fs`)."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-oauth-")
    issuer = Issuer(pathlib.Path(data))
    (pathlib.Path(data) / "workspace").mkdir()
    (pathlib.Path(data) / "workspace" / "notes.txt").write_text("hello\n")
    server = HttpServer(
        [
            "--oauth-issuer", issuer.url,
            "--oauth-ca-file", str(issuer.ca_file),
            "--components", str(COMPONENTS / "echo.wasm"),
            "--components", str(COMPONENTS / "fs.wasm"),
        ],
        data,
    )
    yield issuer, server
    server.stop()
    issuer.stop()
    shutil.rmtree(data, ignore_errors=True)


def post(server, token, method="tools/list", params=None):
    """One stateless 2026-07-28 request with `token` (None: no Authorization header)."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "chitin-oauth-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}
    return httpx2.post(server.url, json=body, headers=headers, timeout=30)


def reply_of(response, request_id=1) -> dict:
    """The JSON-RPC reply to `request_id` in a response, plain JSON or an event stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                message = json.loads(line[5:])
                if message.get("id") == request_id:
                    return message
        raise AssertionError(f"no reply in the stream: {response.text}")
    return response.json()


def challenge(response) -> dict:
    """The parameters of a `WWW-Authenticate: Bearer k="v", ...` challenge."""
    header = response.headers.get("www-authenticate", "")
    assert header.startswith("Bearer "), header
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def sdk(server, token, **kwargs) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(server.url, http_client=http), mode="auto", **kwargs)


def metadata_url(server):
    return f"http://{server.host}/.well-known/oauth-protected-resource/mcp"


def test_the_protected_resource_metadata_is_served_without_a_token(oauth):
    issuer, server = oauth
    for url in [metadata_url(server), f"http://{server.host}/.well-known/oauth-protected-resource"]:
        response = httpx2.get(url, timeout=10)
        assert response.status_code == 200, response.text
        document = response.json()
        assert document["resource"] == server.url
        assert document["authorization_servers"] == [issuer.url]
        assert {"tools:basic", "tools:fs", "tools:runtime"} <= set(document["scopes_supported"])


def test_a_request_without_a_token_is_challenged_with_the_metadata(oauth):
    _, server = oauth
    response = post(server, None)
    assert response.status_code == 401
    assert challenge(response) == {"resource_metadata": metadata_url(server)}


@pytest.mark.anyio
async def test_a_good_token_lists_and_calls_what_its_scopes_reach(oauth):
    issuer, server = oauth
    token = issuer.token(server.url, "tools:basic tools:fs")
    async with sdk(server, token) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"echo", "read_file", "write_file"} <= names, names
        result = await client.call_tool("read_file", {"path": "notes.txt"})
        assert not result.is_error, result
        assert "hello" in "".join(b.text for b in result.content if b.type == "text")


@pytest.mark.anyio
async def test_a_narrow_token_sees_only_its_tools_and_gets_a_scope_challenge(oauth):
    issuer, server = oauth
    token = issuer.token(server.url, "tools:basic")
    async with sdk(server, token) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"echo"}, names
        result = await client.call_tool("echo", {"message": "in scope"})
        assert not result.is_error, result
    response = post(server, token, "tools/call", {"name": "read_file", "arguments": {"path": "notes.txt"}})
    assert response.status_code == 403, response.text
    params = challenge(response)
    assert params["error"] == "insufficient_scope"
    assert "tools:fs" in params["scope"].split(), params
    assert params["resource_metadata"] == metadata_url(server)
    assert "`read_file`" in response.text


def test_a_token_for_another_audience_is_refused(oauth):
    issuer, server = oauth
    token = issuer.token("https://other.example/mcp", "tools:basic")
    response = post(server, token)
    assert response.status_code == 401
    params = challenge(response)
    assert params["error"] == "invalid_token"
    assert "audience" in params["error_description"], params


def test_an_expired_token_is_refused(oauth):
    issuer, server = oauth
    token = issuer.token(server.url, "tools:basic", expires_in=-600)
    response = post(server, token)
    assert response.status_code == 401
    params = challenge(response)
    assert params["error"] == "invalid_token"
    assert "expired" in params["error_description"], params


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_unsigned_and_shared_secret_tokens_are_refused(oauth):
    issuer, server = oauth
    claims = b64(json.dumps({
        "iss": issuer.url, "aud": server.url, "exp": int(time.time()) + 300, "scope": "tools:all",
    }).encode())
    unsigned = f"{b64(json.dumps({'alg': 'none', 'kid': KID}).encode())}.{claims}."
    # The classic confusion: HS256 keyed with the issuer's public key, which anyone has.
    header = b64(json.dumps({"alg": "HS256", "kid": KID}).encode())
    mac = hmac.new(issuer.public_pem, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    confused = f"{header}.{claims}.{b64(mac)}"
    for token in [unsigned, confused, "not-a-jwt"]:
        response = post(server, token)
        assert response.status_code == 401, (token, response.text)
        assert challenge(response)["error"] == "invalid_token"


def test_unknown_key_ids_do_not_make_the_server_refetch_the_keys(oauth):
    issuer, server = oauth
    assert post(server, issuer.token(server.url, "tools:basic")).status_code == 200
    before = issuer.jwks_fetches
    for _ in range(10):
        token = issuer.token(server.url, "tools:basic", kid=str(uuid.uuid4()))
        response = post(server, token)
        assert response.status_code == 401
        assert "no signing key" in challenge(response)["error_description"]
    # At most one refetch per interval (30 s), however many unknown key ids come in.
    assert issuer.jwks_fetches - before <= 1, issuer.jwks_fetches - before


def test_the_static_bearer_token_still_reaches_every_tool(oauth):
    _, server = oauth
    response = post(server, server.token)
    assert response.status_code == 200, response.text
    names = {t["name"] for t in reply_of(response)["result"]["tools"]}
    assert {"echo", "read_file"} <= names


@pytest.mark.anyio
async def test_an_always_allow_covers_only_the_person_that_gave_it(oauth):
    """`write_file` asks a person first. Each person below ticks "always allow" when asked: the
    users of one OAuth application, and the operator with the server's own token, are each
    asked once, whatever the others allowed before them."""
    issuer, server = oauth
    asked = []

    def always(who):
        async def answer(context, params):
            asked.append(who)
            return types.ElicitResult(action="accept", content={"approve": True, "always": True})

        return answer

    people = {
        "alice": issuer.token(server.url, "tools:fs", sub="alice"),
        "bob": issuer.token(server.url, "tools:fs", sub="bob"),
        "operator": server.token,
    }
    for who in ["alice", "alice", "bob", "operator", "bob", "alice", "operator"]:
        async with sdk(server, people[who], elicitation_callback=always(who)) as client:
            result = await client.call_tool("write_file", {"path": f"{who}.txt", "content": who})
            assert not result.is_error, result
    assert asked == ["alice", "bob", "operator"], asked
    assert (server.data_dir / "workspace" / "bob.txt").read_text() == "bob"


@pytest.mark.anyio
async def test_each_user_has_an_outbound_request_rate_of_their_own(oauth):
    """Outbound HTTP is rate limited per user and tool. Under a policy of 3 requests a minute,
    alice spending hers leaves bob his: each request below is refused afterwards (a loopback
    address), but counted first."""
    issuer, _ = oauth
    data = tempfile.mkdtemp(prefix="chitin-mcp-oauth-rate-")
    policy = pathlib.Path(data) / "policy.toml"
    default = (REPO / "policies" / "default.toml").read_text()
    sixty = "rate_limit = { per_minute = 60, per_hour = 1000 }"
    assert sixty in default
    policy.write_text(default.replace(sixty, "rate_limit = { per_minute = 3, per_hour = 1000 }"))
    server = HttpServer(
        [
            "--oauth-issuer", issuer.url,
            "--oauth-ca-file", str(issuer.ca_file),
            "--policy", str(policy),
            "--components", str(COMPONENTS / "http.wasm"),
        ],
        data,
    )

    def refusal(result):
        assert result.is_error, result
        return "".join(b.text for b in result.content if b.type == "text")

    blocked = {"method": "GET", "url": "https://127.0.0.1:9/"}
    try:
        # Alice's fourth request comes through an application of her own making: the same user.
        spending = [("alice", 3, "test-client"), ("alice", 1, "hers"), ("bob", 1, "test-client")]
        for who, calls, app in spending:
            token = issuer.token(server.url, "tools:web", sub=who, client_id=app)
            async with sdk(server, token, elicitation_callback=approve) as client:
                texts = [refusal(await client.call_tool("http", blocked)) for _ in range(calls)]
            # Refused at the allowlist, so counted first; alice's fourth is over her rate.
            if app == "hers":
                assert texts[0].startswith("rate-limited:"), texts
                assert "3 requests per minute" in texts[0], texts
            else:
                assert all("not-allowed" in t for t in texts), texts
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


async def approve(context, params):
    return types.ElicitResult(action="accept", content={"approve": True})


@contextlib.asynccontextmanager
async def two_shells_held(server, token):
    """Two shell calls of `token`, approved, held running on a gate file for the block's length;
    both must then end well."""
    workspace = server.data_dir / "workspace"
    held = []

    async def hold(n):
        wait = f"touch started-{n}; while [ ! -e gate ]; do sleep 0.05; done; echo done"
        async with sdk(server, token, elicitation_callback=approve) as client:
            held.append(await client.call_tool("shell", {"command": wait, "timeout": 60}))

    async with anyio.create_task_group() as group:
        for n in range(2):
            group.start_soon(hold, n)
        try:
            with anyio.fail_after(60):
                while not all((workspace / f"started-{n}").exists() for n in range(2)):
                    await anyio.sleep(0.05)
            yield
        finally:
            (workspace / "gate").write_text("")
    assert len(held) == 2 and not any(r.is_error for r in held), held


async def refused_for_one_user_only(server, refused, allowed, tool, args, *says):
    """`tool` with `args` is refused as rate-limited, with each of `says` in the message, for
    each token of `refused`, and runs for each of `allowed`; their results."""
    for token in refused:
        async with sdk(server, token, elicitation_callback=approve) as client:
            result = await client.call_tool(tool, args)
        text = "".join(b.text for b in result.content if b.type == "text")
        assert result.is_error and "rate-limited" in text, text
        assert all(said in text for said in says), text
    results = []
    for token in allowed:
        async with sdk(server, token, elicitation_callback=approve) as client:
            results.append(await client.call_tool(tool, args))
    assert not any(r.is_error for r in results), results
    return results


@pytest.mark.anyio
async def test_one_user_runs_only_their_share_of_the_hosts_processes(oauth):
    """The host runs 5 processes at once, at most 2 for one OAuth user: while alice's agent
    holds two shells open, her third is refused, through an application of her own making too,
    and bob's and the operator's still run."""
    issuer, _ = oauth
    data = tempfile.mkdtemp(prefix="chitin-mcp-oauth-processes-")
    server = HttpServer(
        [
            "--oauth-issuer", issuer.url,
            "--oauth-ca-file", str(issuer.ca_file),
            "--components", str(COMPONENTS / "shell.wasm"),
        ],
        data,
    )
    def shell(command):
        return {"command": command, "timeout": 60}

    alice = issuer.token(server.url, "tools:runtime", sub="alice")
    alice_elsewhere = issuer.token(server.url, "tools:runtime", sub="alice", client_id="hers")
    bob = issuer.token(server.url, "tools:runtime", sub="bob")
    try:
        async with two_shells_held(server, alice):
            others = await refused_for_one_user_only(
                server, [alice, alice_elsewhere], [bob, server.token], "shell", shell("echo mine"),
                '"alice"', "limit for one user",
            )
            assert all(r.structured_content["stdout"] == "mine\n" for r in others), others
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.anyio
async def test_one_user_runs_only_so_many_tool_calls_at_once(oauth):
    """Under a policy of 2 tool calls at once for one user (and room for 5 processes each), while
    alice's agent holds two shell calls open, her third call of any tool is refused, through an
    application of her own making too, and bob's and the operator's still run."""
    issuer, _ = oauth
    data = tempfile.mkdtemp(prefix="chitin-mcp-oauth-calls-")
    policy = pathlib.Path(data) / "policy.toml"
    default = (REPO / "policies" / "default.toml").read_text()
    bounds = [("max_running_per_user = 16", "max_running_per_user = 2"),
              ("max_running_per_user = 2", "max_running_per_user = 5")]
    for old, new in bounds:
        assert old in default, old
    before, after = default.split("[calls]")
    policy.write_text(before.replace(*bounds[1]) + "[calls]" + after.replace(*bounds[0]))
    server = HttpServer(
        [
            "--oauth-issuer", issuer.url,
            "--oauth-ca-file", str(issuer.ca_file),
            "--policy", str(policy),
            "--components", str(COMPONENTS / "shell.wasm"),
            "--components", str(COMPONENTS / "echo.wasm"),
        ],
        data,
    )
    scopes = "tools:runtime tools:basic"
    alice = issuer.token(server.url, scopes, sub="alice")
    alice_elsewhere = issuer.token(server.url, scopes, sub="alice", client_id="hers")
    bob = issuer.token(server.url, scopes, sub="bob")
    try:
        async with two_shells_held(server, alice):
            await refused_for_one_user_only(
                server, [alice, alice_elsewhere], [bob, server.token], "echo", {"message": "mine"},
                '"alice" already runs 2 tool calls', "[calls] max_running_per_user",
            )
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


def session_post(server, token, body, session=None):
    """One 2025-11-25 session message with `token` (beginning a session without `session`)."""
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    return httpx2.post(server.url, json=body, headers=headers, timeout=30)


def test_a_session_answers_only_the_user_that_began_it(oauth):
    """Two users of one application (one `client_id`, two `sub`), from one address: the session
    one began is unknown to the other."""
    issuer, server = oauth
    alice = issuer.token(server.url, "tools:basic", sub="alice")
    bob = issuer.token(server.url, "tools:basic", sub="bob")
    begun = session_post(server, alice, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "chitin-oauth-test", "version": "1"},
        },
    })
    assert begun.status_code == 200, begun.text
    session = begun.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert session_post(server, alice, initialized, session).status_code == 202
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    refused = session_post(server, bob, listing, session)
    assert refused.status_code == 404, refused.text
    assert "began no session" in refused.text, refused.text
    listed = session_post(server, alice, listing, session)
    assert listed.status_code == 200, listed.text
    assert [t["name"] for t in reply_of(listed, 2)["result"]["tools"]] == ["echo"]


def test_one_user_keeps_only_so_many_sessions_whichever_application(oauth):
    """A user counts as one client for the 64-session bound through every application: an
    issuer that lets anyone register applications would otherwise give one person a bound per
    application. Another user still begins sessions."""
    issuer, server = oauth
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "chitin-oauth-test", "version": "1"},
        },
    }
    begun = []
    try:
        for n in range(64):
            token = issuer.token(server.url, "tools:basic", sub="carol", client_id=f"app-{n % 2}")
            response = session_post(server, token, initialize)
            assert response.status_code == 200, response.text
            begun.append((token, response.headers["mcp-session-id"]))
        another_app = issuer.token(server.url, "tools:basic", sub="carol", client_id="app-2")
        refused = session_post(server, another_app, initialize)
        assert refused.status_code == 429, refused.text
        assert 'oauth user "carol"' in refused.text and "64 MCP sessions" in refused.text
        dave = issuer.token(server.url, "tools:basic", sub="dave")
        assert session_post(server, dave, initialize).status_code == 200
    finally:
        for token, session in begun:
            httpx2.delete(server.url, headers={
                "Authorization": f"Bearer {token}", "Mcp-Session-Id": session,
                "MCP-Protocol-Version": "2025-11-25",
            }, timeout=30)


def test_an_unreachable_issuer_fails_closed():
    """An issuer whose keys cannot be fetched: every token is refused with 503, none accepted."""
    data = tempfile.mkdtemp(prefix="chitin-mcp-oauth-down-")
    directory = pathlib.Path(data)
    issuer = Issuer(directory)
    url = issuer.url
    issuer.stop()
    server = HttpServer(
        [
            "--oauth-issuer", url,
            "--oauth-ca-file", str(issuer.ca_file),
            "--components", str(COMPONENTS / "echo.wasm"),
        ],
        data,
    )
    try:
        token = issuer.token(server.url, "tools:basic")
        response = post(server, token)
        assert response.status_code == 503, response.text
        assert "unavailable" in response.text
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
