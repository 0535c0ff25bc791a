// The binary front as `[agent.iggy_tcp]` configures it: addresses parsed, certificate files read
// once at start (a file that cannot be read stops the start with its path named).
import { parseListen } from "../config/listen.ts";
import type { IggyTcpConfig } from "../config/schema.ts";
import { readPemFile } from "../config/pem_file.ts";
import { type IggyTcp, type IggyTcpOptions, startIggyTcp } from "./front.ts";

const pem = (path: string, key: string) => readPemFile(path, `agent.iggy_tcp.${key}`);

/**
 * Starts the front `c` describes (its `listen` must be set).
 * @throws {PemFileError} when a certificate file cannot be read
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
