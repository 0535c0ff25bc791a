// A topic deleted and recreated with the same id beside the real Iggy 0.8.0 and 0.9.0-edge.5
// servers, read through tierd's Iggy listener (`[agent.iggy_http]`) and its own records API
// (`GET /v1/streams/S/topics/T/partitions/P/records`): a reader of the new topic must never be
// answered a message of the deleted one. Reported from outside: on Iggy 0.9 the first poll
// through the listener, 0.06 s after the recreate, answered the deleted topic's messages.
//
// One cycle: the topic gets ~7 segments of 1 MiB whose messages are marked with the topic's
// "life" (payload `L0:n:`, id 1_000_000 + n, for offset n of the first topic; `L1:n:` and
// 2_000_000 + n for the topic that replaces it, …); tierd (fs store, eviction through the
// broker's DeleteSegments, the Iggy listener on) copies them and evicts all but the last
// segments; a reader polls the evicted offsets through the listener (tierd answers them, and its
// probe of the broker for that token is fresh, as a live consumer's would be). Then the topic is
// deleted through the broker's API and at once (no sleep) created again with the same name and
// id, and the new, empty topic is polled without pause for 3 s — rounds of: the listener with
// kind=offset value=0, kind=first, kind=next (a consumer that had stored an offset in the old
// topic), then tierd's records API from offset 0 — the partition directory's identity (dev:ino)
// and `.log` files noted before and after each round. Then a few messages are produced to the
// new topic, and the rounds go on until every answer is those messages (at most 5 s).
//
// What a user must see: never a message of a deleted topic. Before the new messages: no message
// (200 with none, or 404), or 503 with Retry-After while tierd settles (or an error the broker
// itself answered tierd at that moment: the tap between them shows it); after them: those
// messages only (offsets, ids, payloads), everywhere within a few seconds.
//
// Whether the defect shows depends on the file system and on timing: the recreated partition
// directory often gets the old one's inode back (ext4 hands a freed inode to the next directory
// made), and then nothing tells tierd's read path (src/read/catalog.ts keeps the journal's state
// while device and inode match) or its worker (src/tier/tier_worker.ts reopens a partition only
// when they change) that the directory is another one. With a new inode tierd sees it at once.
// So a cycle that showed nothing wrong is repeated on the new topic (the next cycle writes to
// it, deletes and recreates it), up to MAX_CYCLES; the timeline of every cycle is printed.
//
// Seen on this machine (ext4) before the fix, 9 runs of the suite: it failed 9 times of 9 on
// 0.9, 8 of 9 on 0.8.
// - Iggy 0.8.0 removes the partition directory before it answers DELETE (204 in 5-14 ms). The
//   recreate, answered 4-12 ms later, has made the new directory with an empty
//   `00000000000000000000.log`, with the old inode in 11 of 17 cycles; with it, 8 of 11 cycles
//   answered deleted messages (kind=first and kind=next the deleted 160..169: the new, empty
//   segment 0 merged with the old copy of 0..159, then the old copies; the records API 160..191
//   from the store), up to +75…+378 ms after the recreate's answer; for kind=first tierd asked
//   the broker nothing (its probe came from the listener's 1 s cache).
// - Iggy 0.9.0-edge.5 answers DELETE in 3-7 ms with every old segment file still there; its
//   reconciler removes them a few ms later — in 4 of 13 cycles not yet at the recreate's answer.
//   The new directory had the old inode in 12 of 13 cycles; 9 of 12 answered deleted messages,
//   up to +0…+120 ms after the recreate (the report's 0.06 s).
// What stops it now: the read path refuses a journal the broker's directory contradicts (a
// segment back where it was evicted, one shorter than its copy, offsets restarted below the
// floor) with 503 `partition_rebuilding` until the agent settles it; a directory the agent saw
// go answers "retry" for a while, then is unknown; and the listener asks the broker afresh
// before it answers a poll itself, forwarding it when the broker's partition is behind tierd's
// copies. Found later, in CI on a loaded host, where 0.9's reconciler lags: a directory emptied
// while the broker recreates it is "retry" too; a listing is not reused when it was taken within
// the kernel's mtime tick of the directory's last change; and on 0.9 a read asks the broker when
// it created the partition once its metadata journal grew (the old files can outlive both
// answers). MAX_CYCLES is 5: the old inode comes back in most cycles, so each version meets it.
//
// Without the servers the suite says why in one line and is ignored (a failure under CI=true).
import assert from "node:assert/strict";
import { freePort } from "../fixtures/_agent.ts";
import {
  findIggyFor,
  IGGY_VERSIONS,
  type IggyServer,
  type IggyVersion,
  startIggy,
} from "../fixtures/iggy.ts";
import { tempDir } from "../_util.ts";
import { fromBase64, type OutgoingMessage, parseJsonExact } from "./_iggy_http.ts";
import { StepRunner, waitUntil } from "./_iggy_steps.ts";
import { type BrokerCall, type BrokerTap, startBrokerTap } from "./_iggy_tap.ts";
import { startTierd, type Tierd } from "./_iggy_tierd.ts";
import { TopicUnderTest } from "./_iggy_topic.ts";
import { logStarts } from "./_iggy_watch.ts";

/** Messages written to each topic before it is deleted: ~7 segments of 1 MiB. */
const OLD_MESSAGES = 880;
const OLD_PAYLOAD = 8_000;
/** Messages produced to the recreated topic. */
const NEW_MESSAGES = 5;
const NEW_PAYLOAD = 100;
/** Messages per request, under the HTTP API's 2 MiB body limit. */
const BATCH = 16;
/** How long the new, empty topic is polled, ms after the recreate was answered. */
const WATCH_MS = 3_000;
/** The moments the timeline sums up, ms after the recreate was answered. */
const MARKS_MS = [0, 50, 200, 1_000, 3_000];
/** How long tierd may take to answer the new topic's messages everywhere. */
const SETTLE_MS = 5_000;
/** Delete-and-recreate cycles at most (fewer once one showed a wrong answer). */
const MAX_CYCLES = 5;
/** The consumer of the `next` polls (it stores an offset in each topic before its delete). */
const CONSUMER = 9;

const availability = await findIggyFor("Iggy recreate e2e (test/e2e/iggy_recreate_test.ts)");

for (const version of IGGY_VERSIONS) {
  Deno.test({
    name: `beside a real Iggy ${version}: a topic deleted and recreated with the same id is ` +
      `never answered with the deleted topic's messages`,
    ignore: !availability.ok,
    fn: (t) => scenario(t, version),
  });
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Message `n` (its offset) of the topic's life `life`: payload `L{life}:{n}:…`, a known id. */
function lifeMessage(life: number, n: number, size: number): OutgoingMessage {
  const payload = new Uint8Array(size).fill(0x2e); // '.'
  payload.set(encoder.encode(`L${life}:${n}:`).subarray(0, size));
  return { id: BigInt(life + 1) * 1_000_000n + BigInt(n), payload, headers: [] };
}

/** One message as tierd answered it. */
interface Answered {
  offset: bigint;
  id: bigint;
  /** From the payload: `L{life}:{n}`; undefined when it is not one of this suite's. */
  life?: number;
  n?: number;
  /** The payload's start, for messages that are not this suite's. */
  head: string;
}

function answered(offset: bigint, id: bigint, payload: Uint8Array): Answered {
  const head = decoder.decode(payload.subarray(0, 16));
  const m = /^L(\d+):(\d+):/.exec(head);
  return { offset, id, life: m ? Number(m[1]) : undefined, n: m ? Number(m[2]) : undefined, head };
}

const markOf = (m: Answered) =>
  m.life === undefined ? `?${JSON.stringify(m.head.slice(0, 8))}` : `L${m.life}:${m.n}`;

/** One request to tierd and its answer. */
interface Observation {
  what: string;
  /** When it was sent, ms after the recreate's (or the produce's) answer, and how long it took. */
  at: number;
  took: number;
  status: number;
  retryAfter: string | null;
  messages: Answered[];
  /** The error body's start, for a non-200. */
  error?: string;
  /** For the records API: where tierd read from. */
  source?: string;
  /** What tierd asked the broker meanwhile (seen by the tap), with the broker's status. */
  brokerCalls: BrokerCall[];
}

/** The partition directory at one moment. */
interface DirView {
  /** `dev:ino`, or `gone`. */
  identity: string;
  /** Its `.log` start offsets. */
  logs: bigint[];
}

/** One round of polls of the new topic. */
interface Round {
  /** ms after the recreate's answer (or the produce's), when the round started and ended. */
  at: number;
  end: number;
  before: DirView;
  observations: Observation[];
  after: DirView;
}

/** What one delete-and-recreate cycle saw. */
interface Cycle {
  number: number;
  /** The deleted topic's life; the new topic's is `life + 1`. */
  life: number;
  /** The broker's first offset after eviction (below it, only tierd has the messages). */
  firstLocal: bigint;
  /** The partition directory before the delete. */
  oldIdentity: string;
  facts: string[];
  /** Rounds before the new messages, from the recreate's answer on. */
  rounds: Round[];
  /** Rounds after the new messages, from the produce's answer on. */
  afterProduce: Round[];
  /** When every answer was the new messages, ms after the produce. */
  settledMs?: number;
  produced: OutgoingMessage[];
  /** tierd's log lines of the cycle that say what it made of the directory. */
  logged: string[];
}

function dirView(dir: string): DirView {
  let identity = "gone";
  try {
    const st = Deno.statSync(dir);
    identity = `${st.dev}:${st.ino}`;
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  const logs: bigint[] = [];
  try {
    for (const e of Deno.readDirSync(dir)) {
      const m = /^(\d{20})\.log$/.exec(e.name);
      if (m) logs.push(BigInt(m[1]));
    }
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
  return { identity, logs: logs.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)) };
}

const showDir = (d: DirView, old: string) =>
  `dir ${d.identity === old ? `${d.identity} (the old inode)` : d.identity} ` +
  `logs [${d.logs.join(",")}]` + (d.logs.some((s) => s > 0n) ? " (the old segment files)" : "");

/** A call tierd made to the broker, without the stream and topic. */
function showCall(c: BrokerCall): string {
  const path = c.path.replace(/^\/streams\/\d+\/topics\/\d+/, "…")
    .replace(/&?auto_commit=false/, "").replace(/partition_id=0&?/, "");
  return `${c.method} ${path} ${c.status ?? "unreachable"}`;
}

/** An answer in a few words (no broker calls: rounds alike in what tierd answered compare equal). */
function showAnswer(o: Observation): string {
  if (o.status !== 200) {
    let code = o.error ?? "";
    try {
      const body = JSON.parse(o.error ?? "") as { code?: string; error?: string };
      code = body.code ?? body.error ?? code;
    } catch {
      // not JSON: its start is shown
    }
    return `${o.status} ${code}${o.retryAfter !== null ? ` retry-after ${o.retryAfter}` : ""}`;
  }
  const ms = o.messages;
  if (ms.length === 0) return "200, no messages";
  const marks = ms.length > 2
    ? `${markOf(ms[0])} … ${markOf(ms.at(-1)!)}`
    : ms.map(markOf).join(" ");
  return `200, ${ms.length} messages at ${ms[0].offset}..${ms.at(-1)!.offset} [${marks}]` +
    (o.source ? ` from ${o.source}` : "");
}

/**
 * What is wrong with an answer to a reader of the topic's life `life`: a message of a deleted
 * topic, a message that is not the one produced at its offset (`produced`), or an answer that is
 * neither messages, none (404), 503 with Retry-After, nor an error the broker answered tierd.
 */
function wrongIn(o: Observation, life: number, produced: OutgoingMessage[]): string[] {
  const out: string[] = [];
  const deleted = o.messages.filter((m) => m.life !== undefined && m.life < life);
  if (deleted.length > 0) {
    out.push(
      `${o.what}: ${deleted.length} messages of the deleted topic (offsets ` +
        `${deleted[0].offset}..${deleted.at(-1)!.offset}: ${markOf(deleted[0])} … ` +
        `${markOf(deleted.at(-1)!)})`,
    );
  }
  const stranger = o.messages.find((m) => {
    if (m.life !== undefined && m.life < life) return false;
    const p = produced[Number(m.offset)];
    return !p || m.life !== life || m.n !== Number(m.offset) || m.id !== p.id;
  });
  if (stranger) {
    out.push(
      `${o.what}: offset ${stranger.offset} id ${stranger.id} ${markOf(stranger)} ` +
        `was never produced there`,
    );
  }
  // 0.9 answers 504 `partition_read_timeout` to a poll while it recreates a partition.
  const brokers = o.status !== 200 && o.brokerCalls.some((c) => c.status === o.status);
  if (
    !(o.status === 200 || o.status === 404 || brokers ||
      (o.status === 503 && o.retryAfter !== null))
  ) out.push(`${o.what}: ${showAnswer(o)}`);
  return out;
}

/**
 * Rounds in order, those alike in directory and answers shown once as a range of times, with
 * the broker calls of the range's first round.
 */
function showRounds(rounds: Round[], old: string, indent: string): string[] {
  const out: string[] = [];
  const key = (r: Round) =>
    [showDir(r.before, old), showDir(r.after, old), ...r.observations.map(showAnswer)].join("|");
  for (let i = 0; i < rounds.length;) {
    let j = i;
    while (j + 1 < rounds.length && key(rounds[j + 1]) === key(rounds[i])) j++;
    const r = rounds[i];
    const span = i === j
      ? `+${r.at.toFixed(0)} ms`
      : `+${r.at.toFixed(0)} … +${rounds[j].at.toFixed(0)} ms (${j - i + 1} rounds)`;
    out.push(`${indent}${span}: before ${showDir(r.before, old)}; after ${showDir(r.after, old)}`);
    for (const o of r.observations) {
      const calls = o.brokerCalls.length > 0
        ? `tierd asked the broker ${o.brokerCalls.map(showCall).join(", ")}`
        : "tierd asked the broker nothing";
      out.push(
        `${indent}  ${o.what}: ${showAnswer(o)} (sent +${o.at.toFixed(0)} ms, took ` +
          `${o.took.toFixed(0)} ms) — ${calls}`,
      );
    }
    i = j + 1;
  }
  return out;
}

function showCycle(c: Cycle): string {
  const wrong = (o: Observation) => wrongIn(o, c.life + 1, []).length > 0;
  const marks = MARKS_MS.map((ms) => {
    const r = c.rounds.find((x) => x.end >= ms);
    if (!r) return `+${ms} ms -`;
    return `+${ms} ms ${r.observations.some(wrong) ? "WRONG" : "right"} ` +
      `(round +${r.at.toFixed(0)}…+${r.end.toFixed(0)})`;
  });
  const all = c.rounds.flatMap((r) => r.observations);
  const lastWrong = all.findLastIndex(wrong);
  const stopped = lastWrong < 0
    ? "never wrong"
    : `the last wrong answer sent at +${all[lastWrong].at.toFixed(0)} ms, ` +
      (lastWrong + 1 < all.length
        ? `every answer right from the one sent at +${all[lastWrong + 1].at.toFixed(0)} ms`
        : "wrong to the end");
  return [
    `cycle ${c.number}: the topic of life L${c.life} deleted, the new one is L${c.life + 1}; ` +
    `the broker's first offset after eviction was ${c.firstLocal}`,
    ...c.facts.map((f) => `  ${f}`),
    `  the new, empty topic polled in ${c.rounds.length} rounds: ${stopped}`,
    `  at the marks: ${marks.join(", ")}`,
    ...showRounds(c.rounds, c.oldIdentity, "    "),
    `  after ${c.produced.length} new messages (${c.afterProduce.length} rounds; ` +
    (c.settledMs === undefined
      ? `not all right within ${SETTLE_MS} ms):`
      : `all right from +${c.settledMs.toFixed(0)} ms after the produce):`),
    ...showRounds(c.afterProduce, c.oldIdentity, "    "),
    `  tierd's log: ${c.logged.join("; ") || "nothing about the directory"}`,
  ].join("\n");
}

async function scenario(t: Deno.TestContext, version: IggyVersion): Promise<void> {
  if (!availability.ok) return;
  const steps = new StepRunner(t);
  const tmp = await tempDir(`tierd-iggy-recreate-${version}`);
  let server: IggyServer | undefined;
  let tierd: Tierd | undefined;
  let tap: BrokerTap | undefined;
  const cycles: Cycle[] = [];
  try {
    const broker = server = await startIggy(availability.binaries[version]);
    const topic = await TopicUnderTest.create(broker, 1);
    const client = topic.client;
    const dir = topic.partitionDir(0);
    const token = client.token!;
    const brokerTap = tap = startBrokerTap(broker.httpUrl);
    const iggyPort = freePort();
    const iggyMessages = `http://127.0.0.1:${iggyPort}/streams/${topic.stream}/topics/` +
      `${topic.topic}/messages`;

    /** Sends messages `from`… of `life` and waits until the broker's files hold them. */
    const write = async (life: number, from: number, count: number, size: number) => {
      const messages = Array.from({ length: count }, (_, i) => lifeMessage(life, from + i, size));
      for (let i = 0; i < count; i += BATCH) {
        await client.send(topic.stream, topic.topic, 0, messages.slice(i, i + BATCH));
      }
      const last = BigInt(from + count - 1);
      if (topic.format === "iggy-0.8") await client.flush(topic.stream, topic.topic, 0);
      await waitUntil(
        `offset ${last} in the broker's files`,
        30_000,
        async () => await topic.lastOffsetOnDisk(0) >= last ? true : undefined,
      );
      return messages;
    };

    /** The listener polls of a reader of partition 0. */
    const polls: [string, string][] = [
      ["listener kind=offset value=0", "kind=offset&value=0&consumer_id=1"],
      ["listener kind=first", "kind=first&value=0&consumer_id=1"],
      [`listener kind=next consumer ${CONSUMER}`, `kind=next&value=0&consumer_id=${CONSUMER}`],
    ];
    const request = async (
      since: number,
      what: string,
      url: string,
      headers: Record<string, string>,
      parse: (text: string) => { messages: Answered[]; source?: string },
    ): Promise<Observation> => {
      const from = brokerTap.calls.length;
      const sent = performance.now();
      const res = await fetch(url, { headers });
      const text = await res.text();
      const o: Observation = {
        what,
        at: sent - since,
        took: performance.now() - sent,
        status: res.status,
        retryAfter: res.headers.get("retry-after"),
        messages: [],
        // The tap records a call once it has the broker's answer, before tierd answers.
        brokerCalls: brokerTap.calls.slice(from),
      };
      return res.status === 200 ? { ...o, ...parse(text) } : { ...o, error: text.slice(0, 200) };
    };
    const pollListener = (since: number, what: string, query: string) =>
      request(
        since,
        what,
        `${iggyMessages}?partition_id=0&count=10&auto_commit=false&${query}`,
        { authorization: `Bearer ${token}` },
        (text) => {
          const json = parseJsonExact(text) as {
            messages: {
              header: { offset: number | bigint; id: number | bigint };
              payload: string;
            }[];
          };
          return {
            messages: json.messages.map((m) =>
              answered(BigInt(m.header.offset), BigInt(m.header.id), fromBase64(m.payload))
            ),
          };
        },
      );
    const readRecords = (since: number) =>
      request(
        since,
        "tierd records offset=0",
        `${tierd!.baseUrl}/v1/streams/${topic.stream}/topics/${topic.topic}/partitions/0/` +
          `records?offset=0&max_bytes=262144&format=json`,
        {},
        (text) => {
          const json = JSON.parse(text) as {
            source: string;
            messages: { offset: string; id: string; payload: string }[];
          };
          return {
            source: json.source,
            messages: json.messages.map((m) =>
              answered(BigInt(m.offset), BigInt(m.id), fromBase64(m.payload))
            ),
          };
        },
      );
    /** One round: the three listener polls and the records read, one after another. */
    const round = async (since: number): Promise<Round> => {
      const at = performance.now() - since;
      const before = dirView(dir);
      const observations: Observation[] = [];
      for (const [what, query] of polls) {
        observations.push(await pollListener(since, what, query));
      }
      observations.push(await readRecords(since));
      const after = dirView(dir);
      return { at, end: performance.now() - since, before, observations, after };
    };

    let life = 0;
    /** Messages of the current topic already there (the new messages of the last cycle). */
    let written = 0;
    for (let number = 1; number <= MAX_CYCLES && !steps.failed; number++) {
      const cycle: Cycle = {
        number,
        life,
        firstLocal: 0n,
        oldIdentity: "",
        facts: [],
        rounds: [],
        afterProduce: [],
        produced: [],
        logged: [],
      };
      const logFrom = tierd?.agent.lines.length ?? 0;

      await steps.run(`cycle ${number}: write ~7 segments of L${life} messages`, async () => {
        await write(life, written, OLD_MESSAGES, OLD_PAYLOAD);
        written += OLD_MESSAGES;
        assert.ok((await logStarts(dir)).length >= 4, "segments");
      });

      await steps.run(
        `cycle ${number}: tierd evicts all but the last segments; the listener serves them`,
        async () => {
          const agent = tierd ??= await startTierd({
            dir: tmp.path,
            dataDir: broker.dataDir,
            brokerUrl: brokerTap.url,
            store: { kind: "fs", path: `${tmp.path}/store` },
            stream: topic.stream,
            topic: topic.topic,
            localRetention: "2 MiB",
            extraConfig: `\n[agent.iggy_http]\nlisten = "127.0.0.1:${iggyPort}"\n`,
          });
          let previous = "";
          const local = await waitUntil("eviction to settle", 60_000, async () => {
            const local = await logStarts(dir);
            const view = (await agent.partitions()).find((p) => p.partition === 0);
            const [first] = await client.poll(topic.stream, topic.topic, 0, 0n, 1);
            const now = JSON.stringify({ local: local.map(String), view: view?.segments });
            const done = view !== undefined && local.length <= 3 && local[0] > 0n &&
              first?.offset === local[0] && view.segments.local === local.length &&
              now === previous;
            previous = now;
            return done ? local : undefined;
          });
          cycle.firstLocal = local[0];
          assert.ok(cycle.firstLocal >= 400n, `the broker's first offset is ${cycle.firstLocal}`);
          // Stored now (before, it would have held eviction back): `next` starts below the
          // broker's first offset, so tierd answers it.
          await client.storeOffset(topic.stream, topic.topic, 0, CONSUMER, 20n);
          // A reader of this topic: tierd answers the offsets only it has.
          const r = await round(performance.now());
          r.observations.forEach((o, i) => {
            const start = i === 2 ? 21 : 0;
            assert.equal(o.status, 200, `${o.what}: ${showAnswer(o)}`);
            assert.deepEqual(
              o.messages.slice(0, 10).map((m) => [m.offset, m.id, markOf(m)]),
              Array.from({ length: 10 }, (_, k) => {
                const n = start + k;
                return [BigInt(n), lifeMessage(life, n, 1).id, `L${life}:${n}`];
              }),
              `${o.what}: ${showAnswer(o)}`,
            );
          });
        },
      );

      await steps.run(
        `cycle ${number}: delete the topic, recreate it at once with the same id, poll it 3 s`,
        async () => {
          const topicsPath = `/streams/${topic.stream}/topics`;
          const before = dirView(dir);
          cycle.oldIdentity = before.identity;
          cycle.facts.push(`before the delete: ${showDir(before, "")}`);
          const deleteSent = performance.now();
          const del = await client.request("DELETE", `${topicsPath}/${topic.topic}`);
          const deleted = performance.now();
          const atDelete = dirView(dir);
          await del.body?.cancel();
          // At once: the same name, id and per-topic options (0.9).
          const created = await fetch(`${broker.httpUrl}${topicsPath}`, {
            method: "POST",
            headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
            body: JSON.stringify({
              topic_id: topic.topic,
              name: "events",
              partitions_count: 1,
              compression_algorithm: "none",
              message_expiry: 0,
              max_topic_size: 0,
              replication_factor: 1,
              ...(topic.format === "iggy-0.9" &&
                { options: { segment_size: "1MiB", messages_required_to_save: "1" } }),
            }),
          });
          const recreated = performance.now();
          const atRecreate = dirView(dir);
          // Polled without a pause from here on, before anything else is looked at.
          while (cycle.rounds.length === 0 || cycle.rounds.at(-1)!.at < WATCH_MS) {
            cycle.rounds.push(await round(recreated));
          }
          const text = await created.text();
          const end = dirView(dir);
          assert.equal(del.status, 204, "the broker deleted the topic");
          assert.ok(created.ok, `recreate: HTTP ${created.status} ${text.slice(0, 300)}`);
          const id = (parseJsonExact(text) as { id: number }).id;
          const first = cycle.rounds[0];
          cycle.facts.push(
            `DELETE answered ${del.status} in ${(deleted - deleteSent).toFixed(1)} ms; at its ` +
              `answer: ${showDir(atDelete, cycle.oldIdentity)}`,
            `recreate answered ${created.status} with id ${id} (it was ${topic.topic}) ` +
              `${(recreated - deleted).toFixed(1)} ms after the delete's answer; at its answer: ` +
              showDir(atRecreate, cycle.oldIdentity),
            `first round of polls at +${first.at.toFixed(1)} ms: before it ` +
              `${showDir(first.before, cycle.oldIdentity)}; after it ` +
              showDir(first.after, cycle.oldIdentity),
            `the new partition directory: ${end.identity} — ` +
              (end.identity === cycle.oldIdentity
                ? "the old one's inode, reused"
                : `a new inode (the old one was ${cycle.oldIdentity})`),
          );
          assert.equal(id, topic.topic, "the topic came back with the same id");
          life++;
          written = 0;
        },
      );

      await steps.run(
        `cycle ${number}: produce ${NEW_MESSAGES} messages to the new topic, poll until tierd ` +
          `answers them`,
        async () => {
          cycle.produced = await write(life, 0, NEW_MESSAGES, NEW_PAYLOAD);
          written = NEW_MESSAGES;
          const sent = performance.now();
          const exact = (o: Observation) =>
            o.status === 200 && o.messages.length === NEW_MESSAGES &&
            o.messages.every((m, n) =>
              m.offset === BigInt(n) && m.id === cycle.produced[n].id && m.life === life &&
              m.n === n
            );
          await waitUntil("tierd to answer the new messages everywhere", SETTLE_MS, async () => {
            const r = await round(sent);
            cycle.afterProduce.push(r);
            if (r.observations.every(exact)) cycle.settledMs = r.at;
            return cycle.settledMs;
          }).catch(() => {}); // not settled: the verdict below says so, with the timeline
          const direct = await client.poll(topic.stream, topic.topic, 0, 0n, 10);
          assert.deepEqual(
            direct.map((m) => [m.offset, m.id]),
            cycle.produced.map((m, n) => [BigInt(n), m.id]),
            "the broker's own answer for the new topic",
          );
        },
      );

      cycle.logged = (tierd?.agent.lines.slice(logFrom) ?? [])
        .filter((l) => /purge|recreat|incarnation|directory/i.test(String(l.msg)))
        .map((l) => `${l.level} "${l.msg}"`);
      cycles.push(cycle);
      const wrong = cycle.rounds.some((r) =>
        r.observations.some((o) => wrongIn(o, cycle.life + 1, []).length > 0)
      );
      if (wrong) break; // shown; the cycles after it would not add to that
    }

    const timeline = () =>
      [`Iggy ${version}, stream ${topic.stream} topic ${topic.topic}:`, ...cycles.map(showCycle)]
        .join("\n");
    console.log(timeline());

    await t.step({
      name: "before the new messages: never a message of the deleted topic",
      ignore: steps.failed,
      fn: () => {
        const problems = cycles.flatMap((c) => {
          const wrong = c.rounds.map((r) => ({
            r,
            w: r.observations.flatMap((o) => wrongIn(o, c.life + 1, [])),
          })).filter((x) => x.w.length > 0);
          if (wrong.length === 0) return [];
          const first = wrong[0];
          const last = wrong.at(-1)!;
          return [
            `cycle ${c.number}: wrong answers in ${wrong.length} of ${c.rounds.length} rounds, ` +
            `from +${first.r.at.toFixed(0)} to +${last.r.at.toFixed(0)} ms after the recreate`,
            ...first.w.map((w) => `  first: ${w}`),
            ...(last === first ? [] : last.w.map((w) => `  last: ${w}`)),
          ];
        });
        if (problems.length > 0) assert.fail(`${problems.join("\n")}\n${timeline()}`);
      },
    });

    await t.step({
      name: "after the new messages: only those, everywhere within a few seconds",
      ignore: steps.failed,
      fn: () => {
        const problems = cycles.flatMap((c) => [
          ...c.afterProduce.flatMap((r) =>
            r.observations.flatMap((o) => wrongIn(o, c.life + 1, c.produced))
              .map((w) => `cycle ${c.number} +${r.at.toFixed(0)} ms after the produce: ${w}`)
          ),
          ...(c.settledMs === undefined
            ? [`cycle ${c.number}: not every answer was the new messages within ${SETTLE_MS} ms`]
            : []),
        ]);
        if (problems.length > 0) assert.fail(`${problems.join("\n")}\n${timeline()}`);
      },
    });
  } finally {
    if (steps.failed) {
      const tail = (text: string) => text.split("\n").slice(-40).join("\n");
      console.error(`tierd's log (tail):\n${tail(tierd?.agent.output() ?? "")}`);
      console.error(`Iggy ${version}'s log (tail):\n${tail(server?.log() ?? "")}`);
    }
    await tierd?.stop().catch(() => {});
    await tap?.close();
    await server?.cleanup();
    await tmp.cleanup();
  }
}
