// The binary front as `[agent.iggy_tcp]` configures it: addresses parsed, certificate files read
// once at start (a file that cannot be read stops the start with its path named).
import { readFile } from "node:fs/promises";
import { parseListen } from "../config/listen.ts";
import type { IggyTcpConfig } from "../config/schema.ts";
import { type IggyTcp, type IggyTcpOptions, startIggyTcp } from "./front.ts";

/** A certificate or key file of `[agent.iggy_tcp]` could not be read. */
export class IggyTcpConfigError extends Error {
  override readonly name = "IggyTcpConfigError";
}

async function pem(path: string, key: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new IggyTcpConfigError(`agent.iggy_tcp.${key}: cannot read ${path}: ${why}`);
  }
}

/**
 * Starts the front `c` describes (its `listen` must be set).
 * @throws {IggyTcpConfigError} when a certificate file cannot be read
 */
export async function startIggyTcpFromConfig(
  c: IggyTcpConfig,
  rest: Omit<
    IggyTcpOptions,
    "hostname" | "port" | "broker" | "tls" | "maxFrameBytes" | "maxConnections"
  >,
): Promise<IggyTcp> {
  const listen = parseListen(c.listen);
  const broker = parseListen(c.broker_address);
  return await startIggyTcp({
    ...rest,
    hostname: listen.host,
    port: listen.port,
    broker: {
      host: broker.host,
      port: broker.port,
      tls: c.broker_tls
        ? {
          ca: c.broker_tls_ca === "" ? undefined : await pem(c.broker_tls_ca, "broker_tls_ca"),
          servername: c.broker_tls_domain === "" ? undefined : c.broker_tls_domain,
        }
        : undefined,
    },
    tls: c.tls_cert === "" ? undefined : {
      cert: await pem(c.tls_cert, "tls_cert"),
      key: await pem(c.tls_key, "tls_key"),
    },
    maxFrameBytes: c.max_frame_size,
    maxConnections: c.max_connections,
  });
}
