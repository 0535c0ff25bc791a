// The binary front (`[agent.iggy_tcp]`): a listener for Iggy's TCP transport, plain or TLS, so
// that a client pointed at tierd instead of the broker reads the offsets the broker has evicted.
// Each accepted connection gets its own connection to the broker (connection.ts); nothing is
// shared between clients but the read path and the name cache.
import { type AddressInfo, createServer, type Socket } from "node:net";
import type { EventEmitter } from "node:events";
import { createServer as createTlsServer } from "node:tls";
import { type Clock, systemClock } from "../base/clock.ts";
import { listenOn } from "../runtime/listen.ts";
import { checkedPair } from "../config/pem_file.ts";
import { NameCache } from "../iggy_front/names.ts";
import { LocalHints } from "../iggy_front/plan.ts";
import { type Logger, silentLogger } from "../log.ts";
import type { TierdMetrics } from "../metrics/tierd.ts";
import type { ReadContext } from "../read/context.ts";
import { ContinuityReaders } from "../read/continuity.ts";
import type { BrokerAddress } from "./broker_link.ts";
import { serveConnection } from "./connection.ts";

/** Options of {@link startIggyTcp}. */
export interface IggyTcpOptions {
  read: ReadContext;
  metrics: TierdMetrics;
  /** Where to listen. */
  hostname: string;
  port: number;
  /** The broker's TCP transport. */
  broker: BrokerAddress;
  /** PEM certificate chain and key: the front speaks TLS to its clients. */
  tls?: { cert: string; key: string };
  /** How long a client's probe and names are reused on one connection. @default 1000 */
  authCacheTtlMs?: number;
  /** Largest frame accepted from a client or the broker. @default 64 MiB */
  maxFrameBytes?: number;
  /** Client connections at most; more are closed as they come. @default 1024 */
  maxConnections?: number;
  /** How long connecting to the broker may take. @default 5000 */
  connectTimeoutMs?: number;
  logger?: Logger;
  clock?: Clock;
}

/** A running front. */
export interface IggyTcp {
  hostname: string;
  port: number;
  connections(): number;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
  /**
   * With TLS: serves new connections with this certificate and key (open ones keep theirs).
   * @throws {TlsPairError} when they do not parse or do not belong together; the pair in use stays
   */
  reloadTls?(pair: { cert: string; key: string }): Promise<void>;
}

/**
 * Starts the binary front.
 * @throws when the address cannot be bound
 */
export async function startIggyTcp(o: IggyTcpOptions): Promise<IggyTcp> {
  const logger = o.logger ?? silentLogger;
  const clock = o.clock ?? systemClock;
  const ttl = o.authCacheTtlMs ?? 1000;
  const maxConnections = o.maxConnections ?? 1024;
  const deps = {
    read: o.read,
    continuity: new ContinuityReaders(),
    logger,
    names: new NameCache(ttl, clock),
    probeTtlMs: ttl,
    hints: new LocalHints(ttl),
    monotonic: () => clock.monotonic(),
    broker: o.broker,
    maxFrameBytes: o.maxFrameBytes ?? 64 * 1024 * 1024,
    connectTimeoutMs: o.connectTimeoutMs ?? 5000,
    metrics: o.metrics,
  };
  const open = new Set<Socket>();
  const accept = (socket: Socket) => {
    if (open.size >= maxConnections) {
      o.metrics.iggyErrors.inc({ listener: "tcp", kind: "too_many_connections" });
      socket.destroy();
      return;
    }
    open.add(socket);
    o.metrics.iggyConnections.set({ listener: "tcp" }, open.size);
    serveConnection(deps, socket).catch((err) =>
      logger.warn("iggy tcp: a connection ended with an error", { err })
    ).finally(() => {
      open.delete(socket);
      o.metrics.iggyConnections.set({ listener: "tcp" }, open.size);
    });
  };
  /** A listener for `accept`: TLS with `pair`, else plain TCP. */
  const create = (pair?: { cert: string; key: string }) => {
    const server = pair ? createTlsServer({ ...checkedPair(pair) }, accept) : createServer(accept);
    // Typed as an emitter: with npm packages' Node types in the same check, `net.Server` loses
    // its EventEmitter methods in Deno's type checker (the value has them in every runtime).
    const events = server as unknown as EventEmitter;
    events.on("error", (err: Error) => logger.warn("iggy tcp: listener error", { err }));
    if (pair) {
      events.on(
        "tlsClientError",
        () => o.metrics.iggyErrors.inc({ listener: "tcp", kind: "client_tls" }),
      );
    }
    return server;
  };
  let server = create(o.tls);
  await listenOn(server, o.hostname, o.port, { clock });
  const address = server.address() as AddressInfo;
  const front: IggyTcp = {
    hostname: o.hostname,
    port: address.port,
    connections: () => open.size,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of open) s.destroy();
      }),
  };
  if (o.tls) {
    front.reloadTls = async (pair) => {
      const next = create(pair); // a pair that does not load keeps the one in use
      // New connections get the new certificate; those open keep theirs until they end.
      server.close();
      await listenOn(next, o.hostname, address.port, { attempts: 50, clock });
      server = next;
    };
  }
  return front;
}
