/**
 * A small kustomize renderer for the manifest tests: enough of kustomize to
 * build deploy/k8s (resources, namespace, images, replicas, and RFC 6902 JSON
 * patches selected by target), and nothing silently: a kustomization field or
 * patch form it does not implement is an error, so the tests can never pass
 * by ignoring part of an overlay. Where `kubectl kustomize` is installed the
 * tests also check that both renderers produce the same objects.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";

/** A Kubernetes object as parsed from YAML. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: arbitrary manifest content, checked by the JSON schemas
  [field: string]: any;
}

/** A rendered object and the file it came from. */
export interface Rendered {
  object: KubeObject;
  source: string;
}

const supportedFields = new Set([
  "apiVersion",
  "kind",
  "resources",
  "namespace",
  "images",
  "replicas",
  "patches",
]);

// Kinds kustomize's namespace transformer leaves alone (cluster-scoped).
const clusterScoped = new Set([
  "Namespace",
  "ClusterRole",
  "ClusterRoleBinding",
  "CustomResourceDefinition",
  "PersistentVolume",
  "StorageClass",
  "PriorityClass",
  "ValidatingWebhookConfiguration",
  "MutatingWebhookConfiguration",
]);

/** Parse every document of a YAML file (empty documents skipped). */
export function loadYamlFile(file: string): KubeObject[] {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  const out: KubeObject[] = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
    const value = doc.toJS() as KubeObject | null;
    if (value !== null) out.push(value);
  }
  return out;
}

interface Target {
  kind?: string;
  name?: string;
  group?: string;
  version?: string;
}

interface JsonPatchOp {
  op: "add" | "remove" | "replace" | "test";
  path: string;
  value?: unknown;
}

function targetMatches(target: Target, object: KubeObject): boolean {
  const [group, version] = object.apiVersion.includes("/")
    ? object.apiVersion.split("/")
    : ["", object.apiVersion];
  return (
    (target.kind === undefined || target.kind === object.kind) &&
    (target.name === undefined || target.name === object.metadata.name) &&
    (target.group === undefined || target.group === group) &&
    (target.version === undefined || target.version === version)
  );
}

function unescapePointer(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

/** Apply one RFC 6902 operation in place (add, remove, replace, test). */
export function applyJsonPatch(document: unknown, op: JsonPatchOp, where: string): void {
  const tokens = op.path.split("/").slice(1).map(unescapePointer);
  const last = tokens.pop();
  if (last === undefined) throw new Error(`${where}: patch path ${op.path} names the whole object`);
  // biome-ignore lint/suspicious/noExplicitAny: walking arbitrary JSON
  let parent: any = document;
  for (const token of tokens) {
    const next = Array.isArray(parent) ? parent[Number(token)] : parent?.[token];
    if (next === undefined || next === null || typeof next !== "object") {
      throw new Error(`${where}: patch path ${op.path} does not exist (at ${token})`);
    }
    parent = next;
  }
  if (Array.isArray(parent)) {
    const index = last === "-" ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) {
      throw new Error(`${where}: bad array index in ${op.path}`);
    }
    if (op.op === "add") parent.splice(index, 0, structuredClone(op.value));
    else if (index >= parent.length) throw new Error(`${where}: ${op.path} does not exist`);
    else if (op.op === "replace") parent[index] = structuredClone(op.value);
    else if (op.op === "remove") parent.splice(index, 1);
    else if (JSON.stringify(parent[index]) !== JSON.stringify(op.value))
      throw new Error(`${where}: test failed at ${op.path}`);
    return;
  }
  const exists = Object.hasOwn(parent, last);
  if (op.op === "add") parent[last] = structuredClone(op.value);
  else if (!exists) throw new Error(`${where}: ${op.op} of missing ${op.path}`);
  else if (op.op === "replace") parent[last] = structuredClone(op.value);
  else if (op.op === "remove") delete parent[last];
  else if (JSON.stringify(parent[last]) !== JSON.stringify(op.value))
    throw new Error(`${where}: test failed at ${op.path}`);
}

function splitImage(image: string): { name: string; tag?: string } {
  const at = image.indexOf("@");
  const withoutDigest = at >= 0 ? image.slice(0, at) : image;
  const colon = withoutDigest.lastIndexOf(":");
  if (colon > withoutDigest.lastIndexOf("/"))
    return { name: withoutDigest.slice(0, colon), tag: withoutDigest.slice(colon + 1) };
  return { name: withoutDigest };
}

// biome-ignore lint/suspicious/noExplicitAny: pod specs of several workload kinds
export function podSpecOf(object: KubeObject): any | undefined {
  if (object.kind === "CronJob") return object.spec?.jobTemplate?.spec?.template?.spec;
  return object.spec?.template?.spec;
}

/** Render the kustomization in `dir` the way `kustomize build dir` would. */
export function renderKustomization(dir: string): Rendered[] {
  const file = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
    .map((name) => join(dir, name))
    .find((candidate) => existsSync(candidate));
  if (!file) throw new Error(`${dir}: no kustomization.yaml`);
  const spec = parseYaml(readFileSync(file, "utf8")) as Record<string, unknown>;
  for (const key of Object.keys(spec)) {
    if (!supportedFields.has(key)) {
      throw new Error(`${file}: kustomization field "${key}" is not supported by this renderer`);
    }
  }

  const rendered: Rendered[] = [];
  for (const entry of (spec.resources as string[] | undefined) ?? []) {
    const path = resolve(dir, entry);
    if (statSync(path).isDirectory()) rendered.push(...renderKustomization(path));
    else for (const object of loadYamlFile(path)) rendered.push({ object, source: path });
  }

  for (const [index, patch] of (
    (spec.patches as Record<string, unknown>[] | undefined) ?? []
  ).entries()) {
    const where = `${file} patches[${index}]`;
    const target = patch.target as Target | undefined;
    if (!target) throw new Error(`${where}: only patches with a target are supported`);
    const text =
      typeof patch.patch === "string"
        ? patch.patch
        : typeof patch.path === "string"
          ? readFileSync(resolve(dirname(file), patch.path), "utf8")
          : undefined;
    if (text === undefined) throw new Error(`${where}: needs patch or path`);
    const ops = parseYaml(text) as unknown;
    if (!Array.isArray(ops)) {
      throw new Error(
        `${where}: only RFC 6902 (JSON patch) lists are supported, not strategic merge`,
      );
    }
    const matched = rendered.filter((r) => targetMatches(target, r.object));
    if (matched.length === 0) throw new Error(`${where}: target matches no object`);
    for (const r of matched)
      for (const op of ops as JsonPatchOp[]) applyJsonPatch(r.object, op, where);
  }

  if (typeof spec.namespace === "string") {
    for (const r of rendered) {
      if (!clusterScoped.has(r.object.kind)) r.object.metadata.namespace = spec.namespace;
    }
  }

  const images = (spec.images as { name: string; newName?: string; newTag?: string }[]) ?? [];
  for (const r of rendered) {
    const pod = podSpecOf(r.object);
    for (const container of [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])]) {
      const current = splitImage(container.image as string);
      const rule = images.find((i) => i.name === current.name);
      if (!rule) continue;
      const name = rule.newName ?? current.name;
      const tag = rule.newTag ?? current.tag;
      container.image = tag ? `${name}:${tag}` : name;
    }
  }

  for (const rule of (spec.replicas as { name: string; count: number }[]) ?? []) {
    const matched = rendered.filter(
      (r) =>
        r.object.metadata.name === rule.name &&
        ["Deployment", "StatefulSet", "ReplicaSet"].includes(r.object.kind),
    );
    if (matched.length === 0) throw new Error(`${file}: replicas names no workload ${rule.name}`);
    for (const r of matched) r.object.spec.replicas = rule.count;
  }
  return rendered;
}
