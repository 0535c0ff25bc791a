// An app over a scenario partition, with its metrics registry, for the HTTP tests.
import type { Hono } from "hono";
import { type AdminOperations, type AppOptions, createApp } from "../../src/http/app.ts";
import { Registry } from "../../src/metrics/registry.ts";
import { createTierdMetrics, type TierdMetrics } from "../../src/metrics/tierd.ts";
import type { ReadContextOptions } from "../../src/read/context.ts";
import type { Scenario } from "../read/_scenario.ts";

export interface TestApp {
  app: Hono;
  registry: Registry;
  metrics: TierdMetrics;
  ready: { value: boolean };
}

export function appFor(
  s: Scenario,
  o: {
    apiToken?: string;
    admin?: AdminOperations;
    read?: Partial<ReadContextOptions>;
    agent?: AppOptions["agent"];
    readGuard?: AppOptions["readGuard"];
  } = {},
): TestApp {
  const registry = new Registry();
  const metrics = createTierdMetrics(registry);
  const ready = { value: true };
  const app = createApp({
    read: s.context({ metrics, ...o.read }),
    registry,
    metrics,
    ready: () => ready.value,
    apiToken: o.apiToken ?? "",
    admin: o.admin,
    storeDescription: "in-memory sim store",
    agent: o.agent,
    readGuard: o.readGuard,
  });
  return { app, registry, metrics, ready };
}

/** The `{ error, message }` body of an error answer, checking it is JSON. */
export async function errorBody(res: Response): Promise<{ error: string; message: string }> {
  if (!res.headers.get("content-type")?.startsWith("application/json")) {
    throw new Error(`status ${res.status} answered ${res.headers.get("content-type")}, not JSON`);
  }
  const body = await res.json();
  if (typeof body.error !== "string" || typeof body.message !== "string") {
    throw new Error(`not an error body: ${JSON.stringify(body)}`);
  }
  return body;
}

export const RECORDS = "/v1/streams/0/topics/0/partitions/0/records";
