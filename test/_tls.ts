// Certificates for TLS tests, made with openssl (on PATH wherever the suites run).

/** A self-signed certificate for `localhost` (and 127.0.0.1), made with openssl. */
export async function selfSigned(
  dir: string,
  name: string,
): Promise<{ cert: string; key: string }> {
  const cert = `${dir}/${name}.pem`;
  const key = `${dir}/${name}.key`;
  await selfSignedBy(["/CN=localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1"], key, cert);
  return { cert, key };
}

/** `openssl req -x509`: a new key and a self-signed certificate for [subject, SAN?]. */
function selfSignedBy([subject, san]: string[], key: string, cert: string): Promise<void> {
  return openssl([
    ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", subject],
    ...(san ? ["-addext", san] : []),
    ...["-keyout", key, "-out", cert],
  ]);
}

async function openssl(args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, stdout: "null", stderr: "piped" }).output();
  if (!out.success) throw new Error(`openssl: ${new TextDecoder().decode(out.stderr)}`);
}

/**
 * A test CA and a server certificate it signed for `localhost` and 127.0.0.1 (clients such as
 * rustls refuse a self-signed CA certificate used as the server's own).
 */
export async function caAndLeaf(
  dir: string,
  name: string,
): Promise<{ ca: string; cert: string; key: string }> {
  const p = (ext: string) => `${dir}/${name}.${ext}`;
  await selfSignedBy([`/CN=tierd test CA ${name}`], p("ca.key"), p("ca.pem"));
  await openssl([
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    "/CN=localhost",
    "-keyout",
    p("key"),
    "-out",
    p("csr"),
  ]);
  await Deno.writeTextFile(
    p("ext"),
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
  );
  await openssl([
    "x509",
    "-req",
    "-in",
    p("csr"),
    "-CA",
    p("ca.pem"),
    "-CAkey",
    p("ca.key"),
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    p("ext"),
    "-out",
    p("pem"),
  ]);
  return { ca: p("ca.pem"), cert: p("pem"), key: p("key") };
}
