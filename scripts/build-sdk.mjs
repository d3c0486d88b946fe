#!/usr/bin/env node
// Builds the publishable @trellis/adapter-sdk: one ESM bundle (the private
// workspace packages it uses — contracts, runtime, eventlog, messages — are
// inlined; public packages stay dependencies), its .d.ts files (the private
// packages' declarations shipped beside it, their imports made relative), a
// publish manifest of its own, and `npm pack` of that. The workspace keeps
// using the TypeScript sources (packages/adapter-sdk/package.json is not
// touched).
//
//   node scripts/build-sdk.mjs [--out DIR]   (default packages/adapter-sdk/dist)
//
// Prints the tarball's path on the last line.
import { spawnSync } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { builtinModules } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import ts from "typescript";

const root = fileURLToPath(new URL("..", import.meta.url));
const sdkDir = join(root, "packages/adapter-sdk");

function parseArgs(argv) {
  let out = join(sdkDir, "dist");
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out" && argv[i + 1]) out = resolve(argv[++i]);
    else throw new Error(`build-sdk: unknown argument ${argv[i]} (usage: --out DIR)`);
  }
  return { out };
}

const readJson = (file) => JSON.parse(readFileSync(file, "utf8"));

/** The private workspace packages by name: their folder and manifest. */
function workspacePackages() {
  const found = new Map();
  for (const entry of readdirSync(join(root, "packages"))) {
    const file = join(root, "packages", entry, "package.json");
    if (!existsSync(file)) continue;
    const manifest = readJson(file);
    found.set(manifest.name, { dir: join(root, "packages", entry), manifest });
  }
  return found;
}

/** "@scope/name/sub" → "@scope/name"; "name/sub" → "name". */
function packageName(specifier) {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : (parts[0] ?? specifier);
}

const isBuiltin = (specifier) =>
  specifier.startsWith("node:") || builtinModules.includes(packageName(specifier));

async function bundleJs(outDir, workspace) {
  const result = await build({
    entryPoints: [join(sdkDir, "src/index.ts")],
    outfile: join(outDir, "dist/index.js"),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    sourcemap: true,
    metafile: true,
    logLevel: "warning",
    plugins: [
      {
        name: "public-packages-external",
        setup(b) {
          // Everything not a relative path nor a private workspace package stays an import.
          b.onResolve({ filter: /^[^./]/ }, (args) =>
            workspace.has(packageName(args.path)) ? undefined : { path: args.path, external: true },
          );
        },
      },
    ],
  });
  const externals = new Set();
  const bundled = new Set();
  for (const output of Object.values(result.metafile.outputs)) {
    for (const imported of output.imports) {
      if (imported.external && !isBuiltin(imported.path)) externals.add(packageName(imported.path));
    }
  }
  for (const input of Object.keys(result.metafile.inputs)) {
    const abs = resolve(root, input);
    for (const [name, pkg] of workspace) if (abs.startsWith(`${pkg.dir}/`)) bundled.add(name);
  }
  return { externals, bundled };
}

/** Version of a public dependency: as a bundled workspace package pins it, else as installed. */
function dependencyVersions(externals, bundled, workspace) {
  const deps = {};
  for (const name of [...externals].sort()) {
    let version;
    for (const pkgName of bundled) {
      const manifest = workspace.get(pkgName).manifest;
      version ??= manifest.dependencies?.[name];
    }
    if (!version) {
      const installed = join(root, "node_modules", name, "package.json");
      if (!existsSync(installed)) throw new Error(`build-sdk: cannot find a version for ${name}`);
      version = readJson(installed).version;
    }
    if (version.startsWith("file:") || version.startsWith("workspace:")) {
      throw new Error(`build-sdk: dependency ${name} is not public (${version})`);
    }
    deps[name] = version;
  }
  return deps;
}

/** tsc declarations of the SDK and of every private source file it reaches, under dist/types/. */
function emitDeclarations(outDir, workspace) {
  const typesDir = join(outDir, "dist/types");
  const base = ts.readConfigFile(join(root, "tsconfig.base.json"), ts.sys.readFile);
  if (base.error) throw new Error(ts.flattenDiagnosticMessageText(base.error.messageText, "\n"));
  const parsed = ts.parseJsonConfigFileContent(base.config, ts.sys, root);
  const options = {
    ...parsed.options,
    noEmit: false,
    declaration: true,
    emitDeclarationOnly: true,
    rootDir: join(root, "packages"),
    outDir: typesDir,
  };
  // Files reached through the workspace's node_modules links count as
  // libraries (not emitted): list every reachable source file as a root.
  const probe = ts.createProgram([join(sdkDir, "src/index.ts")], options);
  const roots = probe
    .getSourceFiles()
    .map((f) => f.fileName)
    .filter((f) => f.startsWith(join(root, "packages")) && !f.includes("/node_modules/"));
  const program = ts.createProgram(roots, options);
  const emitted = program.emit();
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics];
  if (diagnostics.length) {
    const host = {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => root,
      getNewLine: () => "\n",
    };
    throw new Error(`build-sdk: declarations failed:\n${ts.formatDiagnostics(diagnostics, host)}`);
  }
  // Private package specifiers become relative paths into dist/types.
  const target = (specifier, fromFile) => {
    const name = packageName(specifier);
    const pkg = workspace.get(name);
    if (!pkg) return undefined;
    const sub = `.${specifier.slice(name.length)}`;
    const exported = pkg.manifest.exports?.[sub];
    if (typeof exported !== "string") {
      throw new Error(`build-sdk: ${specifier} is not in ${name}'s exports`);
    }
    const dts = join(typesDir, relative(join(root, "packages"), pkg.dir), exported).replace(
      /\.ts$/,
      ".js",
    );
    let rel = relative(dirname(fromFile), dts);
    if (!rel.startsWith(".")) rel = `./${rel}`;
    return rel;
  };
  const bare = new Set();
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const file = join(dir, entry.name);
      if (entry.isDirectory()) walk(file);
      else if (file.endsWith(".d.ts")) {
        const text = readFileSync(file, "utf8");
        const next = text.replace(
          /(from\s+|import\(\s*|import\s+)(["'])([^"']+)\2/g,
          (match, lead, quote, specifier) => {
            if (specifier.startsWith(".")) return match;
            const rel = target(specifier, file);
            if (rel) return `${lead}${quote}${rel}${quote}`;
            if (!isBuiltin(specifier)) bare.add(packageName(specifier));
            return match;
          },
        );
        if (next !== text) writeFileSync(file, next);
      }
    }
  };
  walk(typesDir);
  const entry = join(typesDir, "adapter-sdk/src/index.d.ts");
  if (!existsSync(entry)) throw new Error(`build-sdk: no ${entry}`);
  return { entry: `./${relative(outDir, entry)}`, bare };
}

async function main() {
  const { out } = parseArgs(process.argv.slice(2));
  const workspace = workspacePackages();
  const sdk = workspace.get("@trellis/adapter-sdk");
  const pkgDir = join(out, "package");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(pkgDir, { recursive: true });

  const { externals, bundled } = await bundleJs(pkgDir, workspace);
  const types = emitDeclarations(pkgDir, workspace);
  // The declarations may name public packages the JS does not import (types only).
  for (const name of types.bare) if (name !== "@types/node") externals.add(name);
  const dependencies = dependencyVersions(externals, bundled, workspace);

  const manifest = {
    name: sdk.manifest.name,
    version: sdk.manifest.version,
    description: "Write an agent backend for Trellis and run it as a worker (NATS or gRPC)",
    license: "Apache-2.0",
    type: "module",
    engines: { node: ">=20.19" },
    main: "./dist/index.js",
    types: types.entry,
    exports: { ".": { types: types.entry, default: "./dist/index.js" } },
    files: ["dist", "README.md"],
    dependencies,
  };
  writeFileSync(join(pkgDir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
  cpSync(join(sdkDir, "README.md"), join(pkgDir, "README.md"));

  const packed = spawnSync("npm", ["pack", "--json", "--pack-destination", out], {
    cwd: pkgDir,
    encoding: "utf8",
  });
  if (packed.status !== 0) throw new Error(`build-sdk: npm pack failed:\n${packed.stderr}`);
  const [info] = JSON.parse(packed.stdout);
  process.stdout.write(
    `bundled ${[...bundled].sort().join(", ")}; depends on ${Object.keys(dependencies).join(", ")}\n`,
  );
  process.stdout.write(`${join(out, info.filename)}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
