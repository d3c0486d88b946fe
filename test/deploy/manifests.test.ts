// deploy/k8s, checked the way a cluster would check it, without a cluster:
// every object of the base, the dependencies and both overlays is rendered
// (kustomize semantics) and validated against the strict Kubernetes 1.27 JSON
// schemas, so a misspelt field fails here; then the references between
// objects (selectors, ports, Secrets, env names, commands) and the security
// and availability rules the deployment promises.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { servableServices } from "../../src/cli/serve.js";
import { createKubeValidator, KUBERNETES_VERSION, type KubeValidator } from "./kube-schemas.js";
import { type KubeObject, podSpecOf, type Rendered, renderKustomization } from "./kustomize.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const k8s = join(root, "deploy/k8s");
const readme = readFileSync(join(k8s, "README.md"), "utf8");

const kustomizations = [
  "base",
  "dependencies/nats",
  "dependencies/postgres",
  "overlays/dev",
  "overlays/prod",
];
const overlays = ["overlays/dev", "overlays/prod"];

// Entry points the manifests use before the code provides them; each must be
// named as pending in deploy/k8s/README.md.
const pendingEntryPoints = ["adapter-worker"];

let validator: KubeValidator;
const renders = new Map<string, Rendered[]>();

beforeAll(() => {
  validator = createKubeValidator();
  for (const dir of kustomizations) renders.set(dir, renderKustomization(join(k8s, dir)));
});

function objectsOf(dir: string): KubeObject[] {
  const rendered = renders.get(dir);
  if (!rendered) throw new Error(`${dir} was not rendered`);
  return rendered.map((r) => r.object);
}

const label = (o: KubeObject) => `${o.kind}/${o.metadata.name}`;
const workloadKinds = new Set(["Deployment", "StatefulSet", "Job"]);
const isTrellisImage = (image: string) => /(^|\/)trellis(:|$)/.test(image);

// biome-ignore lint/suspicious/noExplicitAny: manifest fragments
type Any = any;

function matches(selector: Record<string, string>, labels: Record<string, string> = {}): boolean {
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

function selectorMatches(selector: Any, labels: Record<string, string> = {}): boolean {
  if (!matches(selector?.matchLabels ?? {}, labels)) return false;
  for (const expr of selector?.matchExpressions ?? []) {
    const value = labels[expr.key];
    if (expr.operator === "In" && !expr.values.includes(value)) return false;
    if (expr.operator === "NotIn" && expr.values.includes(value)) return false;
    if (expr.operator === "Exists" && value === undefined) return false;
    if (expr.operator === "DoesNotExist" && value !== undefined) return false;
  }
  return true;
}

function podsOf(objects: KubeObject[]) {
  return objects
    .filter((o) => workloadKinds.has(o.kind))
    .map((o) => ({
      owner: o,
      labels: (o.spec.template.metadata?.labels ?? {}) as Record<string, string>,
      spec: podSpecOf(o),
    }));
}

function portsOf(container: Any): { name?: string; containerPort: number }[] {
  return container.ports ?? [];
}

function hasPort(container: Any, port: string | number): boolean {
  return portsOf(container).some((p) => p.containerPort === port || p.name === port);
}

describe(`deploy/k8s against the Kubernetes ${KUBERNETES_VERSION} schemas (strict)`, () => {
  it.each(kustomizations)("every object of %s is valid", (dir) => {
    const problems = (renders.get(dir) ?? []).flatMap(({ object, source }) =>
      validator.validate(object).map((e) => `${relative(root, source)} ${label(object)}: ${e}`),
    );
    expect(problems).toEqual([]);
    expect(renders.get(dir)?.length).toBeGreaterThan(0);
  });

  it("covers every kind the manifests use", () => {
    const kinds = new Set(objectsOf("overlays/prod").map((o) => `${o.apiVersion}/${o.kind}`));
    expect([...kinds].sort()).toEqual([
      "apps/v1/Deployment",
      "apps/v1/StatefulSet",
      "autoscaling/v2/HorizontalPodAutoscaler",
      "batch/v1/Job",
      "networking.k8s.io/v1/NetworkPolicy",
      "policy/v1/PodDisruptionBudget",
      "v1/ConfigMap",
      "v1/Namespace",
      "v1/Service",
      "v1/ServiceAccount",
    ]);
  });

  it("rejects a misspelt field, a wrong type and an unknown kind", () => {
    const deployment = structuredClone(
      objectsOf("base").find((o) => o.metadata.name === "trellis-chat" && o.kind === "Deployment"),
    ) as KubeObject;
    const container = deployment.spec.template.spec.containers[0];
    container.readinesProbe = container.readinessProbe;
    delete container.readinessProbe;
    deployment.spec.template.spec.securityContext.runAsNonroot = true;
    deployment.spec.replicas = "two";
    const errors = validator.validate(deployment);
    expect(errors).toContain('/spec/template/spec/containers/0: unknown field "readinesProbe"');
    expect(errors).toContain('/spec/template/spec/securityContext: unknown field "runAsNonroot"');
    expect(errors).toContain("/spec/replicas: must be integer");
    expect(validator.validate({ apiVersion: "apps/v1", kind: "Deploymnet" })).toEqual([
      `no Kubernetes ${KUBERNETES_VERSION} schema for apps/v1/Deploymnet`,
    ]);
  });

  describe("a typo in an overlay patch", () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), "trellis-overlay-"));
      writeFileSync(
        join(dir, "kustomization.yaml"),
        [
          "apiVersion: kustomize.config.k8s.io/v1beta1",
          "kind: Kustomization",
          `resources: [${JSON.stringify(join(k8s, "base"))}]`,
          "patches:",
          "  - target: {kind: HorizontalPodAutoscaler, name: trellis-gateway}",
          "    patch: |-",
          "      - op: add",
          "        path: /spec/maxReplica",
          "        value: 40",
        ].join("\n"),
      );
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("renders, then fails validation", () => {
      const hpa = renderKustomization(dir).find(
        (r) =>
          r.object.kind === "HorizontalPodAutoscaler" &&
          r.object.metadata.name === "trellis-gateway",
      );
      expect(hpa).toBeDefined();
      expect(validator.validate(hpa?.object as KubeObject)).toEqual([
        '/spec: unknown field "maxReplica"',
      ]);
    });
  });
});

describe.each(overlays)("%s: references between objects", (dir) => {
  it("every Service selects pods that serve its target ports", () => {
    const objects = objectsOf(dir);
    const pods = podsOf(objects);
    for (const service of objects.filter((o) => o.kind === "Service")) {
      const selected = pods.filter((p) => matches(service.spec.selector, p.labels));
      expect(
        selected.map((p) => label(p.owner)),
        label(service),
      ).not.toEqual([]);
      for (const port of service.spec.ports) {
        for (const pod of selected) {
          expect(
            pod.spec.containers.some((c: Any) => hasPort(c, port.targetPort ?? port.port)),
            `${label(service)} port ${port.name} → ${label(pod.owner)}`,
          ).toBe(true);
        }
      }
    }
  });

  it("every probe targets a port its container declares", () => {
    for (const pod of podsOf(objectsOf(dir))) {
      for (const container of pod.spec.containers) {
        for (const kind of ["startupProbe", "readinessProbe", "livenessProbe"]) {
          const probe = container[kind];
          if (!probe || probe.exec) continue;
          const port = probe.grpc?.port ?? probe.httpGet?.port ?? probe.tcpSocket?.port;
          expect(hasPort(container, port), `${label(pod.owner)} ${kind} port ${port}`).toBe(true);
        }
      }
    }
  });

  it("autoscalers, disruption budgets and network policies point at real workloads", () => {
    const objects = objectsOf(dir);
    const pods = podsOf(objects);
    for (const hpa of objects.filter((o) => o.kind === "HorizontalPodAutoscaler")) {
      const { kind, name } = hpa.spec.scaleTargetRef;
      const target = objects.find((o) => o.kind === kind && o.metadata.name === name);
      expect(target, label(hpa)).toBeDefined();
      // An autoscaled Deployment leaves replicas to the autoscaler.
      expect(target?.spec.replicas, `${label(hpa)} target sets replicas`).toBeUndefined();
      expect(hpa.spec.minReplicas).toBeLessThanOrEqual(hpa.spec.maxReplicas);
    }
    for (const pdb of objects.filter((o) => o.kind === "PodDisruptionBudget")) {
      expect(
        pods.some((p) => p.owner.kind !== "Job" && selectorMatches(pdb.spec.selector, p.labels)),
        label(pdb),
      ).toBe(true);
    }
    for (const policy of objects.filter((o) => o.kind === "NetworkPolicy")) {
      const selected = pods.filter((p) => selectorMatches(policy.spec.podSelector, p.labels));
      expect(selected.length, label(policy)).toBeGreaterThan(0);
      for (const rule of policy.spec.ingress ?? []) {
        for (const port of rule.ports ?? []) {
          expect(
            selected.some((p) => p.spec.containers.some((c: Any) => hasPort(c, port.port))),
            `${label(policy)} port ${port.port}`,
          ).toBe(true);
        }
        for (const peer of rule.from ?? []) {
          if (!peer.podSelector) continue;
          expect(
            pods.some((p) => selectorMatches(peer.podSelector, p.labels)),
            `${label(policy)} peer`,
          ).toBe(true);
        }
      }
    }
  });

  it("every Secret and ConfigMap referenced exists or is documented as external", () => {
    const objects = objectsOf(dir);
    const configMaps = new Map(
      objects.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o.data ?? {}]),
    );
    // The README's Secret table: | `name` | `key` | …
    const documented = new Set(
      [...readme.matchAll(/^\|\s*`([a-z0-9-]+)`\s*\|\s*`([^`]+)`\s*\|/gm)].map(
        (m) => `${m[1]}/${m[2]}`,
      ),
    );
    const secretRef = (name: string, key: string, where: string) =>
      expect(documented.has(`${name}/${key}`), `${where}: Secret ${name} key ${key}`).toBe(true);
    const configMapRef = (name: string, key: string | undefined, where: string) => {
      const data = configMaps.get(name);
      expect(data, `${where}: ConfigMap ${name}`).toBeDefined();
      if (key !== undefined)
        expect(Object.hasOwn(data ?? {}, key), `${where}: ${name}/${key}`).toBe(true);
    };
    let secretRefs = 0;
    for (const pod of podsOf(objects)) {
      const where = label(pod.owner);
      for (const container of pod.spec.containers) {
        for (const env of container.env ?? []) {
          const s = env.valueFrom?.secretKeyRef;
          if (s) {
            secretRef(s.name, s.key, where);
            secretRefs++;
          }
          const c = env.valueFrom?.configMapKeyRef;
          if (c) configMapRef(c.name, c.key, where);
        }
        for (const from of container.envFrom ?? []) {
          if (from.configMapRef) configMapRef(from.configMapRef.name, undefined, where);
          if (from.secretRef) throw new Error(`${where}: envFrom Secret (name its keys instead)`);
        }
      }
      for (const volume of pod.spec.volumes ?? []) {
        if (volume.secret) {
          expect(
            volume.secret.items,
            `${where} volume ${volume.name} lists its keys`,
          ).toBeDefined();
          for (const item of volume.secret.items)
            secretRef(volume.secret.secretName, item.key, where);
          secretRefs++;
        }
        if (volume.configMap) configMapRef(volume.configMap.name, undefined, where);
      }
    }
    expect(secretRefs).toBeGreaterThan(10);
  });

  it("Trellis containers run a real command, on their declared port, with env the code reads", () => {
    const sources = sourceText();
    const objects = objectsOf(dir);
    const config = objects.find(
      (o) => o.kind === "ConfigMap" && o.metadata.name === "trellis-config",
    );
    const serviceNames = readdirSync(join(root, "services")).filter((d) =>
      statSync(join(root, "services", d)).isDirectory(),
    );
    const read = (name: string) =>
      new RegExp(`\\b${name}\\b`).test(sources) ||
      serviceNames.some((s) => name === `TRELLIS_${s.toUpperCase()}_URL`);
    for (const key of Object.keys(config?.data ?? {})) {
      expect(read(key), `trellis-config ${key} is read by no code`).toBe(true);
    }
    let checked = 0;
    for (const pod of podsOf(objects)) {
      for (const container of pod.spec.containers.filter((c: Any) => isTrellisImage(c.image))) {
        const where = `${label(pod.owner)} ${container.name}`;
        const [command, service] = container.args;
        expect(["serve", "migrate"], where).toContain(command);
        if (command === "serve") {
          const known = servableServices.includes(service);
          const pending =
            pendingEntryPoints.includes(service) && readme.includes(`serve ${service}`);
          expect(known || pending, `${where}: trellis serve ${service}`).toBe(true);
          const port = Number(container.env.find((e: Any) => e.name === "PORT")?.value);
          expect(hasPort(container, port), `${where}: PORT ${port}`).toBe(true);
          expect(container.readinessProbe?.grpc?.port, where).toBe(port);
          expect(container.livenessProbe?.grpc?.port, where).toBe(port);
        }
        for (const env of container.env ?? []) {
          expect(read(env.name), `${where}: ${env.name} is read by no code`).toBe(true);
        }
        expect(container.image, where).not.toBe("trellis");
        checked++;
      }
    }
    expect(checked).toBe(7);
  });

  it("pods run non-root, read-only, without capabilities, with seccomp and resource limits", () => {
    for (const pod of podsOf(objectsOf(dir))) {
      const where = label(pod.owner);
      expect(pod.spec.securityContext?.runAsNonRoot, where).toBe(true);
      expect(pod.spec.securityContext?.runAsUser, where).toBeGreaterThan(0);
      expect(pod.spec.securityContext?.seccompProfile?.type, where).toBe("RuntimeDefault");
      expect(pod.spec.automountServiceAccountToken, where).toBe(false);
      for (const container of pod.spec.containers) {
        const sc = container.securityContext ?? {};
        expect(sc.readOnlyRootFilesystem, `${where} ${container.name}`).toBe(true);
        expect(sc.allowPrivilegeEscalation, `${where} ${container.name}`).toBe(false);
        expect(sc.capabilities?.drop, `${where} ${container.name}`).toEqual(["ALL"]);
        for (const kind of ["requests", "limits"]) {
          expect(container.resources?.[kind]?.cpu, `${where} ${kind}`).toBeDefined();
          expect(container.resources?.[kind]?.memory, `${where} ${kind}`).toBeDefined();
        }
      }
    }
  });

  it("has the promised shape: services, autoscalers, budgets, isolation, NATS and Postgres", () => {
    const objects = objectsOf(dir);
    const names = (kind: string) =>
      objects
        .filter((o) => o.kind === kind)
        .map((o) => o.metadata.name)
        .sort();
    expect(names("Deployment")).toEqual(
      ["adapter-worker", "adapters", "chat", "gateway", "receipts", "tasks"].map(
        (s) => `trellis-${s}`,
      ),
    );
    expect(names("HorizontalPodAutoscaler")).toEqual([
      "trellis-adapter-worker",
      "trellis-chat",
      "trellis-gateway",
    ]);
    const budgeted = objects
      .filter((o) => o.kind === "PodDisruptionBudget")
      .map((o) => o.spec.selector.matchLabels["app.kubernetes.io/name"]);
    // Everything with more than one replica; the one-instance PostgreSQL gains
    // nothing from a budget (production uses a managed or operator cluster).
    for (const workload of objects.filter(
      (o) =>
        (o.kind === "Deployment" || o.kind === "StatefulSet") &&
        o.metadata.name !== "trellis-postgres",
    ))
      expect(budgeted, label(workload)).toContain(workload.metadata.name);
    // Only the gateway takes traffic from outside the mesh.
    const open = objects.filter(
      (o) =>
        o.kind === "NetworkPolicy" &&
        (o.spec.ingress ?? []).some((rule: Any) => rule.from === undefined),
    );
    expect(open.map((o) => o.spec.podSelector.matchLabels)).toEqual([
      { "app.kubernetes.io/name": "trellis-gateway" },
    ]);
    const deny = objects.find((o) => o.metadata.name === "trellis-default-deny-ingress");
    expect(deny?.spec).toEqual({ podSelector: {}, policyTypes: ["Ingress"] });
    const nats = objects.find(
      (o) => o.kind === "StatefulSet" && o.metadata.name === "trellis-nats",
    );
    expect(nats?.spec.replicas).toBe(3);
    expect(nats?.spec.volumeClaimTemplates[0].metadata.name).toBe("data");
    const natsConf = objects.find((o) => o.metadata.name === "trellis-nats-config")?.data[
      "nats.conf"
    ];
    expect(natsConf).toMatch(/jetstream \{\s*store_dir: \/data/);
    expect(natsConf.match(/nats:\/\/trellis-nats-\d\.trellis-nats-cluster:6222/g)).toHaveLength(3);
    // Clients must present the token: the server reads it from the Secret
    // (required), and every Trellis container that talks to NATS gets the same key.
    expect(natsConf).toMatch(/authorization \{\s*token: \$NATS_TOKEN\s*\}/);
    const serverToken = nats?.spec.template.spec.containers[0].env.find(
      (e: Any) => e.name === "NATS_TOKEN",
    );
    expect(serverToken?.valueFrom.secretKeyRef).toEqual({ name: "trellis-nats", key: "token" });
    const deployments = objects.filter((o) => o.kind === "Deployment");
    expect(deployments.length).toBeGreaterThanOrEqual(6);
    for (const workload of deployments) {
      const env = workload.spec.template.spec.containers[0].env ?? [];
      const token = env.find((e: Any) => e.name === "NATS_TOKEN");
      expect(token?.valueFrom.secretKeyRef, label(workload)).toMatchObject({
        name: "trellis-nats",
        key: "token",
      });
    }
    expect(names("StatefulSet")).toEqual(["trellis-nats", "trellis-postgres"]);
    const job = objects.find((o) => o.kind === "Job");
    expect(job?.spec.template.spec.containers[0].args).toEqual(["migrate"]);
    expect(objects.every((o) => o.kind === "Namespace" || o.metadata.namespace)).toBe(true);
  });
});

let cachedSources: string | undefined;
/** The TypeScript the services run (where env variable names are read). */
function sourceText(): string {
  if (cachedSources !== undefined) return cachedSources;
  const dirs = [join(root, "src")];
  for (const parent of ["packages", "services"]) {
    for (const name of readdirSync(join(root, parent))) dirs.push(join(root, parent, name, "src"));
  }
  const parts: string[] = [];
  const walk = (dir: string) => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(dir, entry);
      if (entry === "gen" || entry === "node_modules") continue;
      if (statSync(path).isDirectory()) walk(path);
      else if (entry.endsWith(".ts")) parts.push(readFileSync(path, "utf8"));
    }
  };
  for (const dir of dirs) walk(dir);
  cachedSources = parts.join("\n");
  return cachedSources;
}

// kustomize itself, when it is installed (kubectl embeds it): both renderers
// must agree, so the checks above hold for what `kubectl apply -k` applies.
// kubectl embeds kustomize; only v4+ knows every field used here (kubectl 1.21+).
const kubectl = spawnSync("kubectl", ["version", "--client", "-o", "json"], { encoding: "utf8" });
const kustomizeMajor = Number(
  /"kustomizeVersion":\s*"v(\d+)/.exec(kubectl.stdout ?? "")?.[1] ?? Number.NaN,
);
const haveKustomize = kubectl.status === 0 && kustomizeMajor >= 4;
describe.skipIf(!haveKustomize)("kubectl kustomize renders the same objects", () => {
  const canonical = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(canonical)
      : value !== null && typeof value === "object"
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
          )
        : value;
  it.each(overlays)("%s", (dir) => {
    const key = (o: KubeObject) => `${o.kind}/${o.metadata.namespace ?? ""}/${o.metadata.name}`;
    const theirs = parseAllDocuments(
      execFileSync("kubectl", ["kustomize", join(k8s, dir)], { encoding: "utf8" }),
    ).map((d) => d.toJS() as KubeObject);
    const mine = objectsOf(dir);
    expect(new Map(mine.map((o) => [key(o), canonical(o)]))).toEqual(
      new Map(theirs.map((o) => [key(o), canonical(o)])),
    );
  });
});
if (!haveKustomize) {
  console.warn(
    "deploy/k8s: no kubectl with kustomize v4+; rendering checked by the built-in renderer only",
  );
}
