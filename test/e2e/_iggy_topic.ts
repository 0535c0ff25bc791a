// The test topic on a real Iggy server and the truth about every message sent to it: what was
// sent (id, payload, headers), when, and what the server's own poll answered for it right after
// the send — kept so later reads (through tierd, or the server after eviction) compare to it.
import { join } from "node:path";
import type { IggyServer } from "../fixtures/iggy.ts";
import { IGGY_ROOT } from "../fixtures/iggy.ts";
import { IggyHttp, type PolledMessage } from "./_iggy_http.ts";
import { type IggyFormat, RecordWalkError, walkRecords } from "./_iggy_records.ts";
import { logStarts, stem } from "./_iggy_watch.ts";
import type { WorkloadBatch, WorkloadMessage } from "./_iggy_workload.ts";

/** One sent message, with the server's answer for it. */
export interface SentMessage extends WorkloadMessage {
  partition: number;
  offset: bigint;
  /** µs since the epoch (ms resolution), before the request was sent and after its answer. */
  sentFrom: bigint;
  sentTo: bigint;
  /** The server's poll answer for this offset, right after the send. */
  polled: PolledMessage;
}

/** The sent messages do not come back from the server as sent. */
export class SendMismatch extends Error {
  override readonly name = "SendMismatch";
}

/** The wall clock in µs, as the server stamps messages (to the millisecond). */
const nowMicros = () => BigInt(Date.now()) * 1000n;

/** The stream and topic the suite creates, and everything sent to it. */
export class TopicUnderTest {
  readonly client: IggyHttp;
  /** partition → offset → message. */
  readonly sent = new Map<number, Map<bigint, SentMessage>>();
  readonly format: IggyFormat;

  private constructor(
    readonly server: IggyServer,
    readonly stream: number,
    readonly topic: number,
    readonly partitions: number,
    client: IggyHttp,
  ) {
    this.client = client;
    this.format = server.version.startsWith("0.8") ? "iggy-0.8" : "iggy-0.9";
    for (let p = 0; p < partitions; p++) this.sent.set(p, new Map());
  }

  /**
   * Logs in and creates a stream and a topic of `partitions` partitions with 1 MiB segments
   * (0.9 takes the size per topic, and is told to flush each batch so segments reach the disk
   * as they are written; the 0.8 config already has 1 MiB segments and a 2 s saver).
   */
  static async create(server: IggyServer, partitions: number): Promise<TopicUnderTest> {
    const client = new IggyHttp(server.httpUrl);
    await client.login(IGGY_ROOT.username, IGGY_ROOT.password);
    const stream = await client.createStream("tierd-e2e");
    const topic = await client.createTopic(stream, {
      name: "events",
      partitions,
      options: server.version.startsWith("0.8")
        ? undefined
        : { segment_size: "1MiB", messages_required_to_save: "1" },
    });
    return new TopicUnderTest(server, stream, topic, partitions, client);
  }

  /** The broker's directory of `partition`. */
  partitionDir(partition: number): string {
    return join(
      this.server.dataDir,
      `streams/${this.stream}/topics/${this.topic}/partitions/${partition}`,
    );
  }

  /** The next offset `partition` will assign. */
  nextOffset(partition: number): bigint {
    return BigInt(this.sent.get(partition)!.size);
  }

  /**
   * Sends one batch, polls its offsets straight back and records each message with the answer.
   * @throws {SendMismatch} when the server answers other ids, payloads or offsets than sent
   */
  async send(batch: WorkloadBatch): Promise<void> {
    const first = this.nextOffset(batch.partition);
    const sentFrom = nowMicros();
    await this.client.send(this.stream, this.topic, batch.partition, batch.messages);
    const sentTo = nowMicros();
    const polled = await this.client.poll(
      this.stream,
      this.topic,
      batch.partition,
      first,
      batch.messages.length,
    );
    if (polled.length !== batch.messages.length) {
      throw new SendMismatch(
        `partition ${batch.partition}: sent ${batch.messages.length} messages from offset ` +
          `${first}, the poll answered ${polled.length}`,
      );
    }
    batch.messages.forEach((m, i) => {
      const answer = polled[i];
      const offset = first + BigInt(i);
      if (answer.offset !== offset || answer.id !== m.id || !sameBytes(answer.payload, m.payload)) {
        throw new SendMismatch(
          `partition ${batch.partition} offset ${offset}: sent id ${m.id} (${m.payload.length} B), ` +
            `polled offset ${answer.offset} id ${answer.id} (${answer.payload.length} B)`,
        );
      }
      this.sent.get(batch.partition)!.set(offset, {
        ...m,
        partition: batch.partition,
        offset,
        sentFrom,
        sentTo,
        polled: answer,
      });
    });
  }

  /** Sends batches one after another. */
  async sendAll(batches: WorkloadBatch[]): Promise<void> {
    for (const b of batches) await this.send(b);
  }

  /**
   * Makes the broker write everything sent to its segment files (0.8: its flush route; 0.9
   * flushes each batch) and waits until the last segment of every partition ends at the
   * last offset sent.
   * @throws {Error} after 30 s, naming the partition and what its files hold
   */
  async flushed(): Promise<void> {
    for (let p = 0; p < this.partitions; p++) {
      if (this.format === "iggy-0.8") await this.client.flush(this.stream, this.topic, p);
      const last = this.nextOffset(p) - 1n;
      const deadline = Date.now() + 30_000;
      let onDisk = -1n;
      while ((onDisk = await this.lastOffsetOnDisk(p)) < last) {
        if (Date.now() > deadline) {
          throw new Error(
            `Iggy ${this.server.version} partition ${p}: files end at offset ${onDisk} 30 s ` +
              `after the send of offset ${last}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  /** The last offset in the partition's last segment file; -1 when it holds none yet. */
  async lastOffsetOnDisk(partition: number): Promise<bigint> {
    const dir = this.partitionDir(partition);
    const starts = await logStarts(dir);
    if (starts.length === 0) return -1n;
    const path = join(dir, `${stem(starts.at(-1)!)}.log`);
    try {
      const records = walkRecords(this.format, await Deno.readFile(path), path);
      return records.at(-1)?.last ?? starts.at(-1)! - 1n;
    } catch (err) {
      if (err instanceof RecordWalkError || err instanceof Deno.errors.NotFound) return -1n;
      throw err;
    }
  }
}

/** Byte-wise equality. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
