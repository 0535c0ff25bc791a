// The broker client's errors quote what the broker answered — so a refusal says why — but
// never the credentials it sent, even when the answer echoes them, and never a URL's user info.
import assert from "node:assert/strict";
import { BrokerClient, BrokerError } from "../../src/tier/broker_client.ts";

const ID = { stream: 1, topic: 2, partition: 3 };
const PASSWORD = "correct-horse-battery";

type Answer = (url: string, init: RequestInit) => Response | Promise<Response>;

function client(answer: Answer, cfg: Partial<{ http_url: string; password: string }> = {}) {
  const calls: string[] = [];
  const c = new BrokerClient(
    {
      http_url: cfg.http_url ?? "http://127.0.0.1:3000",
      username: "iggy",
      password: cfg.password ?? PASSWORD,
      personal_access_token: "",
      tls_ca: "",
    },
    (url, init) => {
      calls.push(`${init.method} ${new URL(url).pathname}`);
      return Promise.resolve(answer(url, init));
    },
  );
  return { c, calls };
}

const login = () =>
  Response.json({
    user_id: 1,
    access_token: { token: "eyJhbGciOiJIUzI1NiJ9.jwt.value", expiry: 0 },
  });

Deno.test("broker client: a refused login says what the broker answered, without the password", async () => {
  const { c } = client(() =>
    Response.json(
      { id: 42, code: "invalid_credentials", reason: `Invalid password ${PASSWORD}` },
      { status: 401 },
    )
  );
  const err = await c.deleteSegments(ID, 2).then(() => undefined, (e) => e);
  assert.ok(err instanceof BrokerError);
  assert.equal(err.status, 401);
  assert.equal(
    err.message,
    "broker login at /users/login refused with HTTP 401: invalid_credentials: Invalid password ***",
  );
});

Deno.test("broker client: a failed DeleteSegments quotes the answer, scrubbed of the JWT it carried", async () => {
  const { c, calls } = client((_url, init) =>
    init.method === "POST"
      ? login()
      : new Response(`forbidden for token eyJhbGciOiJIUzI1NiJ9.jwt.value\n\n and more`, {
        status: 403,
      })
  );
  const err = await c.deleteSegments(ID, 2).then(() => undefined, (e) => e);
  assert.ok(err instanceof BrokerError);
  assert.equal(
    err.message,
    "broker DeleteSegments /streams/1/topics/2/partitions/3?segments_count=2 failed with HTTP " +
      "403: forbidden for token *** and more",
  );
  assert.deepEqual(calls, ["POST /users/login", "DELETE /streams/1/topics/2/partitions/3"]);
});

Deno.test("broker client: an unreachable broker is named without the user info of its URL", async () => {
  const { c } = client(
    () =>
      Promise.reject(new TypeError(`error sending request for url (http://u:${PASSWORD}@h:1/)`)),
    { http_url: `http://u:${PASSWORD}@h:1` },
  );
  const err = await c.deleteSegments(ID, 1).then(() => undefined, (e) => e);
  assert.ok(err instanceof BrokerError);
  assert.ok(!err.message.includes(PASSWORD), err.message);
  assert.equal(
    err.message,
    "broker http://h:1 unreachable: error sending request for url (http://h:1/)",
  );
  assert.equal(c.where, "http://h:1");
});

Deno.test("broker client: a short password cannot be scrubbed from an answer, and is never sent in one", async () => {
  // Iggy's default `iggy` is also the username and the key prefix: too short to be told apart.
  const { c } = client(
    () => Response.json({ code: "invalid_credentials", reason: "user iggy" }, { status: 401 }),
    { password: "iggy" },
  );
  const err = await c.deleteSegments(ID, 1).then(() => undefined, (e) => e);
  assert.match(err.message, /invalid_credentials: user iggy$/);
});

Deno.test("broker client: DeleteSegments go one at a time, whatever the partitions", async () => {
  let inFlight = 0;
  let most = 0;
  const { c, calls } = client(async (url, init) => {
    if (url.endsWith("/users/login")) return login();
    inFlight++;
    most = Math.max(most, inFlight);
    await new Promise((resolve) => setTimeout(resolve, 5));
    inFlight--;
    return init.method === "DELETE" && url.includes("/partitions/4")
      ? new Response("no", { status: 500 })
      : new Response(null, { status: 204 });
  });
  const results = await Promise.allSettled(
    [3, 4, 5, 6].map((partition) => c.deleteSegments({ ...ID, partition }, 1)),
  );
  assert.equal(most, 1, "two DeleteSegments reached the broker at once");
  assert.deepEqual(results.map((r) => r.status), [
    "fulfilled",
    "rejected",
    "fulfilled",
    "fulfilled",
  ]);
  assert.equal(calls.filter((c) => c.startsWith("DELETE")).length, 4, "a failure stops no other");
});

Deno.test("broker client: a partition's birth is its created_at in the topic's details", async () => {
  let tokens = 0;
  const topic = (partitions: unknown) => Response.json({ id: 2, name: "events", partitions });
  const answers: Answer[] = [
    () => topic([{ id: 0, created_at: 1 }, { id: 3, created_at: 1796250328765298 }]),
    () => topic([{ id: 0, created_at: 1 }]),
    () => Response.json({ id: 404, code: "not_found" }, { status: 404 }),
    () => topic([{ id: 3, created_at: "yesterday" }]),
    () => Response.json({ id: 2 }),
    () => new Response("not json"),
    () => new Response("boom", { status: 500 }),
  ];
  let next = 0;
  const { c, calls } = client((_url, init) => {
    if (init.method === "POST") {
      tokens++;
      return login();
    }
    // A broker restart (a new JWT) before the first question: one login more, then the answer.
    if (tokens === 1 && next === 0) return new Response("", { status: 401 });
    return answers[next++](_url, init);
  });
  assert.equal(await c.partitionBirth(ID), 1796250328765298);
  assert.deepEqual(calls.slice(0, 4), [
    "POST /users/login",
    "GET /streams/1/topics/2",
    "POST /users/login",
    "GET /streams/1/topics/2",
  ]);
  assert.equal(await c.partitionBirth(ID), undefined, "no partition 3 in the topic");
  assert.equal(await c.partitionBirth(ID), undefined, "no such topic");
  for (const why of [/without a created_at/, /without a partitions list/, /partitions list/]) {
    await assert.rejects(
      c.partitionBirth(ID),
      (e) => e instanceof BrokerError && why.test(e.message),
    );
  }
  await assert.rejects(
    c.partitionBirth(ID),
    (e) => e instanceof BrokerError && e.status === 500 && /HTTP 500: boom/.test(e.message),
  );
});
