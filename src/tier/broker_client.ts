// The routes of Iggy's HTTP API the agent uses (docs/architecture.md, "The broker contract"):
// log in (password or personal access token); DeleteSegments (`evict_via = "broker"`), which
// drops the N oldest sealed segments of a partition so the broker's own view stays true; and a
// topic's details, for when the broker created a partition (the read path's proof that a
// journal still describes it).
// Its errors quote what the broker answered (foreign text, scrubbed of the client's own
// credentials when they are long enough to be distinctive) and never the credentials it sent.
import type { BrokerConfig } from "../config/schema.ts";
import type { PartitionId } from "../layout/partition.ts";
import { foreignTextScrubber, type Scrub } from "../scrub.ts";
import { fetchWithCa } from "../http/ca_fetch.ts";

/** How much of a broker's error answer an error message quotes. */
const ANSWER_EXCERPT = 200;

/** The broker refused or failed a request; the message never carries credentials. */
export class BrokerError extends Error {
  override readonly name = "BrokerError";
  constructor(message: string, readonly status?: number) {
    super(message);
  }
}

type Fetch = (input: string, init: RequestInit) => Promise<Response>;

/**
 * The access token in the broker's answer to a login (`POST /users/login`, or
 * `/personal-access-tokens/login`): `access_token.token`, or `access_token` itself as a string.
 * @returns undefined when the answer holds none
 */
export function loginToken(text: string): string | undefined {
  let token: unknown;
  try {
    const json = JSON.parse(text) as { access_token?: { token?: unknown } | string };
    token = typeof json.access_token === "string" ? json.access_token : json.access_token?.token;
  } catch {
    return undefined;
  }
  return typeof token === "string" && token !== "" ? token : undefined;
}

/** A logged-in client of the broker's HTTP API; logs in again when the token is refused. */
export class BrokerClient {
  #cfg: BrokerConfig;
  #fetch: Fetch;
  #scrub: Scrub;
  /** The current token, or the one login in flight (partitions share it). */
  #token?: Promise<string>;
  /** The DeleteSegments in flight, which the next one waits for. */
  #deleting: Promise<unknown> = Promise.resolve();

  constructor(cfg: BrokerConfig, fetchFn: Fetch = cfg.tls_ca ? fetchWithCa(cfg.tls_ca) : fetch) {
    this.#cfg = cfg;
    this.#fetch = fetchFn;
    this.#scrub = foreignTextScrubber([cfg.password, cfg.personal_access_token]);
  }

  /** The broker's URL for messages: without any user info it may carry. */
  get where(): string {
    return withoutUserInfo(this.#cfg.http_url);
  }

  /** A network failure, its text scrubbed (it may name the URL). */
  #unreachable(err: unknown): BrokerError {
    return new BrokerError(
      `broker ${this.where} unreachable: ${this.#scrub(withoutUserInfo((err as Error).message))}`,
    );
  }

  /**
   * `: {what the broker said}` for an error message, or "" for an empty answer; scrubbed of the
   * credentials and of `token` (the JWT the request carried).
   */
  #answer(text: string, token?: string): string {
    const said = describeAnswer(text);
    if (said === "") return "";
    return `: ${foreignTextScrubber(token ? [token] : [])(this.#scrub(said))}`;
  }

  #url(path: string): string {
    return this.#cfg.http_url.replace(/\/+$/, "") + path;
  }

  async #login(): Promise<string> {
    const pat = this.#cfg.personal_access_token;
    const [path, body] = pat !== ""
      ? ["/personal-access-tokens/login", { token: pat }]
      : ["/users/login", { username: this.#cfg.username, password: this.#cfg.password }];
    let res: Response;
    try {
      res = await this.#fetch(this.#url(path), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    } catch (err) {
      throw this.#unreachable(err);
    }
    const text = await res.text();
    if (!res.ok) {
      throw new BrokerError(
        `broker login at ${path} refused with HTTP ${res.status}${this.#answer(text)}`,
        res.status,
      );
    }
    const token = loginToken(text);
    if (token === undefined) {
      throw new BrokerError(`broker login at ${path} answered without an access token`);
    }
    return token;
  }

  /**
   * Asks the broker to delete the `count` oldest sealed segments of a partition. The broker
   * may keep some (consumer barrier); the caller confirms from the directory what is gone.
   *
   * One at a time per broker, whatever the partitions: Iggy 0.8 writes each DeleteSegments to
   * its `state` log, numbering the entry before an asynchronous append (core/server/src/state/
   * file.rs `apply`), so two at once can land out of order — and the broker then refuses to
   * boot ("State file is corrupted, expected index: 5, got: 6"), seen in this project's e2e
   * suite after a restart.
   */
  deleteSegments(id: PartitionId, count: number): Promise<void> {
    const turn = this.#deleting.then(() => this.#deleteSegments(id, count));
    this.#deleting = turn.catch(() => {});
    return turn;
  }

  async #deleteSegments(id: PartitionId, count: number): Promise<void> {
    const path = `/streams/${id.stream}/topics/${id.topic}/partitions/${id.partition}` +
      `?segments_count=${count}`;
    const { res, token } = await this.#authorized("DELETE", path);
    if (!res.ok) {
      throw new BrokerError(
        `broker DeleteSegments ${path} failed with HTTP ${res.status}` +
          this.#answer(await res.text().catch(() => ""), token),
        res.status,
      );
    }
    await res.body?.cancel();
  }

  /**
   * When the broker created the partition (its `created_at`, µs since the epoch, from
   * `GET /streams/{s}/topics/{t}`): a topic deleted and created again under the same ids is
   * another partition with another birth.
   * @param signal gives the question up
   * @returns undefined when the broker has no such topic or partition (404, or not listed)
   * @throws {BrokerError} when the broker cannot be asked or its answer cannot be read
   */
  async partitionBirth(id: PartitionId, signal?: AbortSignal): Promise<number | undefined> {
    const path = `/streams/${id.stream}/topics/${id.topic}`;
    const { res, token } = await this.#authorized("GET", path, signal);
    const text = await res.text().catch(() => "");
    if (res.status === 404) return undefined;
    if (!res.ok) {
      throw new BrokerError(
        `broker GET ${path} failed with HTTP ${res.status}${this.#answer(text, token)}`,
        res.status,
      );
    }
    let partitions: unknown;
    try {
      partitions = (JSON.parse(text) as { partitions?: unknown }).partitions;
    } catch {
      partitions = undefined;
    }
    if (!Array.isArray(partitions)) {
      throw new BrokerError(`broker GET ${path} answered without a partitions list`);
    }
    const entry = partitions.find((p) => (p as { id?: unknown })?.id === id.partition) as
      | { created_at?: unknown }
      | undefined;
    if (entry === undefined) return undefined;
    const birth = entry.created_at;
    if (typeof birth !== "number" || !Number.isSafeInteger(birth) || birth < 0) {
      throw new BrokerError(
        `broker GET ${path} answered partition ${id.partition} without a created_at`,
      );
    }
    return birth;
  }

  /**
   * `method path` with the agent's token, logged in first when there is none; a 401 logs in
   * once more (a broker restart changes the JWT) — once for every caller that met the same
   * stale token.
   */
  async #authorized(
    method: string,
    path: string,
    signal?: AbortSignal,
  ): Promise<{ res: Response; token: string }> {
    for (let attempt = 0;; attempt++) {
      const pending = this.#token ??= this.#login();
      let token: string;
      try {
        token = await pending;
      } catch (err) {
        if (this.#token === pending) this.#token = undefined; // the next call logs in again
        throw err;
      }
      let res: Response;
      try {
        res = await this.#fetch(this.#url(path), {
          method,
          headers: { authorization: `Bearer ${token}` },
          signal,
        });
      } catch (err) {
        throw this.#unreachable(err);
      }
      if (res.status === 401 && attempt === 0) {
        await res.body?.cancel();
        if (this.#token === pending) this.#token = undefined;
        continue;
      }
      return { res, token };
    }
  }
}

/** `url` with any `user:password@` taken out (text that is not a URL is searched too). */
function withoutUserInfo(text: string): string {
  return text.replace(/(\bhttps?:\/\/)[^\s/@]*@/gi, "$1");
}

/**
 * What an error answer says, in one line: Iggy's `{"code","reason"}` JSON as `code: reason`,
 * other text cut to {@link ANSWER_EXCERPT} characters.
 */
function describeAnswer(text: string): string {
  const trimmed = text.trim();
  if (trimmed === "") return "";
  try {
    const json = JSON.parse(trimmed) as { code?: unknown; reason?: unknown };
    const parts = [json.code, json.reason].filter((v) => typeof v === "string" && v !== "");
    if (parts.length > 0) return parts.join(": ").slice(0, ANSWER_EXCERPT);
  } catch {
    // not JSON: quoted as text
  }
  const line = trimmed.replace(/\s+/g, " ");
  return line.length > ANSWER_EXCERPT ? `${line.slice(0, ANSWER_EXCERPT)}…` : line;
}
