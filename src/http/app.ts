// tierd's HTTP API as a plain Hono app: health, readiness, metrics, the partition
// list, the agent's status (`/v1/status`, JSON), record reads, the status page and guarded
// admin operations. Runtime-free: the adapter in serve.ts binds it to a port; tests call
// `app.request(path)`.
//
// Records: `GET /v1/streams/:s/topics/:t/partitions/:p/records?offset=N|timestamp=T
// [&max_bytes=M][&format=raw|json]`. Ids are decimal u32; offset and timestamp decimal u64;
// `max_bytes` 1..67108864 (64 MiB), default 1048576. Raw answers carry `x-tierd-first-offset`,
// `x-tierd-next-offset`, `x-tierd-source`, `x-tierd-format`, `x-tierd-records` and, when the
// read had to skip missing offsets, `x-tierd-gap: from-to` (inclusive). An offset inside an Iggy
// 0.9 batch returns the whole batch, so `x-tierd-first-offset` may be below the offset asked
// for. An optional `x-tierd-reader` request header names a sequential reader for readahead.
// Raw answers are streamed window by window (each validated before it is sent), so a read holds
// a few MiB however large its answer; one that fails mid-answer cuts the connection.
import { piecesOf, pieceStream } from "../base/piece_stream.ts";
import { Hono } from "hono";
import type { Context } from "hono";
import type { Logger } from "../log.ts";
import type { Registry } from "../metrics/registry.ts";
import { observePartitions, type TierdMetrics } from "../metrics/tierd.ts";
import type { ReadContext } from "../read/context.ts";
import { reserveRead } from "../read/read_budget.ts";
import { readToJson } from "../read/json.ts";
import { ParamError, parseId, parseMaxBytes, parseStart } from "../read/params.ts";
import { summarizePartitions } from "../read/partitions.ts";
import { openRead, type ReadAnswer, readRecords, type ReadResult } from "../read/read_records.ts";
import { PIECE_WINDOW } from "../read/answer_stream.ts";
import { requireBearer } from "./auth.ts";
import type { ReadGuard } from "./read_auth.ts";
import { ApiError, toApiError } from "./errors.ts";
import { DEFAULT_REFRESH_SECONDS, renderStatusFragment, renderStatusPage } from "./status_page.ts";
import { type AgentView, partitionJson, type StatusJson, statusJson } from "./status_model.ts";
import { VERSION } from "../version.ts";
import { ContinuityReaders } from "../read/continuity.ts";

/** Operations behind `POST /v1/admin/*`; each resolves with a JSON-serializable report. */
export interface AdminOperations {
  /** `POST /v1/admin/pass`: one tier pass now (copy, clean dangling, advance floors). */
  pass?: () => Promise<unknown>;
  /** `POST /v1/admin/compact`: rewrite every journal as a snapshot. */
  compact?: () => Promise<unknown>;
}

/** What the app serves from. */
export interface AppOptions {
  read: ReadContext;
  registry: Registry;
  metrics: TierdMetrics;
  /** True once the boot probe passed and journals were replayed (every partition opened). */
  ready: () => boolean;
  /** The running agent's side of the status page and `/v1/status` (passes, rates, cache). */
  agent?: AgentView;
  /** `agent.api_token`; empty disables the admin routes. */
  apiToken: string;
  /** Who may read records (`agent.read_auth`); absent: anyone who reaches the listener. */
  readGuard?: ReadGuard;
  admin?: AdminOperations;
  /** Where the store is, for the status page (never with credentials). */
  storeDescription?: string;
  /** Process start, ms since the epoch. @default when the app was created */
  startedAt?: number;
  /** @default read.logger */
  logger?: Logger;
  /**
   * Scrubs secrets (config and store credentials) from error messages and admin reports before
   * they are sent: the providers already scrub their errors, this is the last line of defence.
   * @default no scrubbing
   */
  scrub?: (text: string) => string;
}

export type { AgentView, PartitionJson, StatusJson } from "./status_model.ts";

const RECORD_QUERY = new Set(["offset", "timestamp", "max_bytes", "format"]);

/**
 * Bytes a JSON read holds at its peak per record byte: the records, the decoded messages with
 * their payloads in base64 (4/3), the JSON text of the answer and its encoded bytes (each a
 * little over 4/3 with the field names).
 */
const JSON_PEAK_PER_RECORD_BYTE = 5;
/** Bytes handed to the server per body chunk. */
const BODY_CHUNK = 1 << 20;
/**
 * Read memory a streamed raw answer reserves: the walk's window, the first window it keeps, the
 * window being validated and the one the socket is sending.
 */
const STREAMED_READ_BYTES = 4 * PIECE_WINDOW;

/**
 * A response body over `bytes` that gives the read's memory back once it has all been sent
 * (or the client went away).
 */
function releasingBody(bytes: Uint8Array, release: () => void): ReadableStream<Uint8Array> {
  return pieceStream(piecesOf(bytes, BODY_CHUNK), { release });
}

/**
 * A response body streaming a read's windows as the client takes them; the read's memory is
 * given back when the answer ends, fails or the client goes away. A failure mid-answer errors
 * the stream, so the server cuts the connection: a client never takes a short body for a whole.
 */
function streamedBody(
  answer: ReadAnswer,
  release: () => void,
  logger: Logger,
  label: string,
): ReadableStream<Uint8Array> {
  let sent = 0;
  const windows = answer.windows();
  const counted: AsyncIterator<Uint8Array> = {
    async next() {
      const r = await windows.next();
      if (!r.done) sent += r.value.length;
      return r;
    },
    return: (value) => windows.return(value),
  };
  return pieceStream(counted, {
    release: () => {
      release();
      void answer.close();
    },
    failed: (err) =>
      logger.error("read failed mid-answer; the connection is cut", {
        partition: label,
        first_offset: answer.firstOffset,
        sent_bytes: sent,
        content_length: answer.byteLength,
        err,
      }),
  });
}

function jsonText(value: unknown): string {
  return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
}

/** A client-chosen reader name for readahead; over-long names are ignored, not stored. */
function readerId(header: string | undefined): string | undefined {
  return header !== undefined && header.length <= 128 ? header : undefined;
}

/** The one value of query parameter `name`, or undefined; a repeated parameter is refused. */
function single(c: Context, name: string): string | undefined {
  const values = c.req.queries(name);
  if (values && values.length > 1) {
    throw new ParamError(name, `${name} is given ${values.length} times; give it once`);
  }
  return values?.[0];
}

/**
 * Builds the HTTP API.
 *
 * @example
 * ```ts ignore
 * const app = createApp({ read, registry, metrics, ready: () => true, apiToken: "" });
 * const res = await app.request("/healthz"); // 200 "ok"
 * ```
 */
export function createApp(o: AppOptions): Hono {
  const app = new Hono();
  const continuity = new ContinuityReaders();
  const clock = o.read.clock;
  const startedAt = o.startedAt ?? clock.now();
  const logger = o.logger ?? o.read.logger;
  const scrub = o.scrub ?? ((text: string) => text);

  app.onError((err, c) => {
    const e = toApiError(err);
    if (e.status >= 500 && e.status !== 503) {
      logger.error("request failed", { path: c.req.path, status: e.status, err });
    }
    for (const [k, v] of Object.entries(e.headers)) c.header(k, v);
    return c.json({ error: e.code, message: scrub(e.message) }, e.status);
  });

  app.notFound((c) =>
    c.json({ error: "not_found", message: `no route for ${c.req.method} ${c.req.path}` }, 404)
  );

  addOpsRoutes(app, o, logger);

  const status = async (): Promise<StatusJson> =>
    statusJson(await summarizePartitions(o.read), {
      version: VERSION,
      store: o.storeDescription ?? `${o.read.store.kind} store`,
      now: clock.now(),
      uptimeSeconds: (clock.now() - startedAt) / 1000,
      ready: o.ready(),
      agent: o.agent,
    });

  app.get("/v1/partitions", async (c) => {
    const partitions = await summarizePartitions(o.read);
    return c.json(partitions.map((p) => partitionJson(p, o.agent)));
  });

  app.get("/v1/status", async (c) => c.json(await status()));

  app.get("/v1/streams/:s/topics/:t/partitions/:p/records", async (c) => {
    const ids = {
      stream: parseId(c.req.param("s"), "stream"),
      topic: parseId(c.req.param("t"), "topic"),
      partition: parseId(c.req.param("p"), "partition"),
    };
    // Who may read, before anything is read or reserved.
    await o.readGuard?.(c.req.header("authorization"), ids);
    for (const name of Object.keys(c.req.queries())) {
      if (!RECORD_QUERY.has(name)) {
        throw new ParamError(name, `unknown parameter ${JSON.stringify(name.slice(0, 40))}`);
      }
    }
    const start = parseStart(single(c, "offset"), single(c, "timestamp"));
    const maxBytes = parseMaxBytes(single(c, "max_bytes"));
    const format = single(c, "format") ?? "raw";
    if (format !== "raw" && format !== "json") {
      throw new ParamError("format", `format must be raw or json, got ${JSON.stringify(format)}`);
    }
    // Memory first: a JSON read holds up to max_bytes of records and, at its peak, what is made
    // of them (decoded messages with base64 payloads, their JSON text, its bytes); a raw answer
    // is streamed, so it holds a few windows whatever its size.
    const reserve = format === "json"
      ? maxBytes * JSON_PEAK_PER_RECORD_BYTE
      : Math.min(maxBytes, STREAMED_READ_BYTES);
    const release = await reserveRead(o.read.budget, reserve);
    // A read that starts where another read of this partition ended is that reader going on:
    // it gets readahead without any header. A given `x-tierd-reader` names it instead.
    const label = `${ids.stream}/${ids.topic}/${ids.partition}`;
    const hinted = readerId(c.req.header("x-tierd-reader"));
    const reader = hinted ??
      (start.offset !== undefined ? continuity.readerFor(label, start.offset) : undefined);
    const req = { partition: ids, ...start, maxBytes, readerId: reader };
    let r: ReadResult | ReadAnswer;
    try {
      r = format === "json" ? await readRecords(o.read, req) : await openRead(o.read, req);
    } catch (err) {
      release();
      throw err;
    }
    if (reader !== undefined && hinted === undefined) continuity.ended(label, reader, r.nextOffset);
    const headers: Record<string, string> = {
      "x-tierd-first-offset": r.firstOffset.toString(),
      "x-tierd-next-offset": r.nextOffset.toString(),
      "x-tierd-source": r.source,
      "x-tierd-format": r.format,
      "x-tierd-records": String(r.records),
      "cache-control": "no-store",
    };
    if (r.gap) headers["x-tierd-gap"] = `${r.gap.from}-${r.gap.to}`;
    if ("bytes" in r) {
      const text = new TextEncoder().encode(jsonText(readToJson(ids, r, start)));
      return c.body(releasingBody(text, release), 200, {
        ...headers,
        "content-type": "application/json",
        "content-length": String(text.length),
      });
    }
    return c.body(streamedBody(r, release, logger, label), 200, {
      ...headers,
      "content-type": "application/octet-stream",
      "content-length": String(r.byteLength),
    });
  });

  app.get("/", async (c) => {
    const s = await status();
    c.header("cache-control", "no-store");
    if (c.req.query("fragment") !== undefined) return c.html(renderStatusFragment(s));
    const refresh = Number(c.req.query("refresh") ?? DEFAULT_REFRESH_SECONDS);
    return c.html(
      renderStatusPage(
        s,
        Number.isFinite(refresh) ? Math.min(3600, Math.max(1, refresh)) : DEFAULT_REFRESH_SECONDS,
      ),
    );
  });

  app.use("/v1/admin/*", requireBearer(o.apiToken));
  const operations = { pass: o.admin?.pass, compact: o.admin?.compact };
  for (const [name, op] of Object.entries(operations)) {
    app.post(`/v1/admin/${name}`, async (c) => {
      if (!op) {
        throw new ApiError(503, "unavailable", `${name} is not available in this process`);
      }
      logger.info("admin operation", { op: name });
      const report = await op();
      return c.body(scrub(jsonText({ ok: true, op: name, report: report ?? null })), 200, {
        "content-type": "application/json",
      });
    });
  }

  return app;
}

/** `/healthz`, `/readyz` and `/metrics`: on the API, and alone on `agent.ops_listen`. */
function addOpsRoutes(app: Hono, o: OpsOptions, logger: Logger): void {
  app.get("/healthz", (c) => c.text("ok"));

  app.get("/readyz", (c) => {
    if (!o.ready()) {
      throw new ApiError(
        503,
        "not_ready",
        `not ready: ${
          o.waitingFor?.() ??
            "the store probe has not passed or journals are still being replayed"
        }`,
        { "retry-after": "1" },
      );
    }
    return c.text("ready");
  });

  app.get("/metrics", async (c) => {
    try {
      observePartitions(o.metrics, await summarizePartitions(o.read), o.read.clock.now());
    } catch (err) {
      logger.warn("partition gauges not refreshed", { err });
    }
    return c.body(o.registry.render(), 200, {
      "content-type": "text/plain; version=0.0.4; charset=utf-8",
    });
  });
}

/** What the ops listener serves from. */
export type OpsOptions = Pick<AppOptions, "read" | "registry" | "metrics" | "ready"> & {
  /** What the agent waits for while it is not ready, for `/readyz` to say. */
  waitingFor?: () => string | undefined;
};

/**
 * The ops listener (`agent.ops_listen`): probes and metrics only, so that the kubelet and
 * Prometheus need not reach the data API. Anything else is 404.
 */
export function createOpsApp(o: OpsOptions & { logger?: Logger }): Hono {
  const app = new Hono();
  const logger = o.logger ?? o.read.logger;
  app.onError((err, c) => {
    const e = toApiError(err);
    for (const [k, v] of Object.entries(e.headers)) c.header(k, v);
    return c.json({ error: e.code, message: e.message }, e.status);
  });
  app.notFound((c) =>
    c.json({ error: "not_found", message: `no route for ${c.req.method} ${c.req.path}` }, 404)
  );
  addOpsRoutes(app, o, logger);
  return app;
}
