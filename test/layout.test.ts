import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import ts from 'typescript';

/**
 * The source tree keeps the shape a reader can follow, read with the TypeScript compiler's parser:
 * 1. No file over 500 lines in `api/`, `runtime/`, `schemas/` and `workers/`, and no function
 *    (declaration, method, accessor, constructor, arrow or function expression; nested ones counted
 *    on their own) whose body spans over 120 lines in `runtime/voice/`, `runtime/calls/` and
 *    `runtime/agent/`.
 * 2. SQL (slonik `sql` tagged templates, `.query(...)` calls) only in files named `repository.ts`,
 *    under `runtime/store/`, or in the commented allow-list below, across `runtime/` and `api/`.
 * 3. No import cycle among the modules of `api/`, `runtime/`, `schemas/` and `workers/`, and
 *    nothing in `runtime/` imports from `api/`. Type-only imports (`import type`, or every named
 *    import marked `type`) are left out of the graph: they order nothing at run time and are erased
 *    from the emitted code, so a type shared both ways is no cycle.
 * A failure names every offender (file:line and name), so the message says what to cut.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const MAX_FILE_LINES = 500;
const MAX_FUNCTION_LINES = 120;
const SIZED = ['runtime/voice', 'runtime/calls', 'runtime/agent'];
const GRAPHED = ['api', 'runtime', 'schemas', 'workers'];
const SQL_SCANNED = ['api', 'runtime'];

/**
 * Files that hold SQL without being named `repository.ts`, each a repository under another name.
 */
const SQL_ALLOWED: Readonly<Record<string, string>> = {
  // The document job queue: claim, lease and finish statements (FOR UPDATE SKIP LOCKED), the
  // knowledge resource's second repository, named after the queue it keeps.
  'runtime/knowledge/jobs.ts': 'document job queue',
  // The PostgreSQL implementation of the SearchIndex interface: a store behind its own interface,
  // the counterpart of the Elasticsearch adapter.
  'runtime/search/postgres.ts': 'PostgreSQL search index',
  // Uploaded files' bytes kept until their ingestion ends: the knowledge resource's third
  // repository, next to the job queue that reads them.
  'runtime/knowledge/uploads.ts': 'uploaded document bytes',
  // The calls' second repository: which process holds a call, its stream tokens, and the
  // requests other processes make of that process.
  'runtime/calls/holding.ts': 'call holders and requests to them',
  // The ledger's second repository: the holds live calls keep on their owners' balances.
  'runtime/ledger/holds.ts': 'balance holds',
  // The one row per periodic sweep that decides which process runs it each period.
  'runtime/sweeps.ts': 'sweep gate',
  // The campaigns' second repository: the dialler's claims of leads, their outcomes and lapsed claims.
  'runtime/campaigns/dialling.ts': 'campaign dialling',
  // The channels' second and third repositories: inbound messages and the inboxes' leases, and the
  // outbox of reply parts with their delivery states.
  'runtime/channels/inboxStore.ts': 'channel inbox',
  'runtime/channels/outboxStore.ts': 'channel outbox',
};

/** Every `.ts` file under `dir` (relative to the project root, with forward slashes). */
function sources(dir: string): string[] {
  const found: string[] = [];
  const walk = (at: string) => {
    for (const entry of readdirSync(join(ROOT, at), { withFileTypes: true })) {
      const path = `${at}/${entry.name}`;
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) found.push(path);
    }
  };
  walk(dir);
  return found.sort();
}

const parsed = new Map<string, ts.SourceFile>();
/** A source file, read from the tree unless `text` is given (the checks' own tests). */
function parse(path: string, text?: string): ts.SourceFile {
  let file = parsed.get(path);
  if (!file) {
    file = ts.createSourceFile(path, text ?? readFileSync(join(ROOT, path), 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
    parsed.set(path, file);
  }
  return file;
}

const lineOf = (file: ts.SourceFile, position: number) => file.getLineAndCharacterOfPosition(position).line + 1;

type FunctionNode = ts.FunctionLikeDeclaration & { body: ts.Node };

function isSizedFunction(node: ts.Node): node is FunctionNode {
  return (
    (ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isConstructorDeclaration(node) ||
      ts.isGetAccessorDeclaration(node) ||
      ts.isSetAccessorDeclaration(node) ||
      ts.isArrowFunction(node) ||
      ts.isFunctionExpression(node)) &&
    node.body !== undefined
  );
}

/** A function's name as a reader finds it: its own, else what it is assigned to or passed to. */
function nameOf(node: FunctionNode, file: ts.SourceFile): string {
  if (node.name) return node.name.getText(file);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name) return parent.name.getText(file);
  if (ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText(file).slice(0, 40)})`;
  if (ts.isNewExpression(parent)) return `(callback of new ${parent.expression.getText(file).slice(0, 40)})`;
  return '(anonymous)';
}

interface Measured {
  readonly where: string;
  readonly name: string;
  readonly lines: number;
}

/** Every function in the file with the lines its body spans, named with its enclosing class and functions. */
function functionsOf(path: string): Measured[] {
  const file = parse(path);
  const found: Measured[] = [];
  const visit = (node: ts.Node, outer: string[]) => {
    let inner = outer;
    if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) inner = [...outer, node.name?.getText(file) ?? '(class)'];
    if (isSizedFunction(node)) {
      const name = [...outer, nameOf(node, file)].join(' > ');
      const lines = lineOf(file, node.body.end) - lineOf(file, node.body.getStart(file)) + 1;
      found.push({ where: `${path}:${lineOf(file, node.getStart(file))}`, name, lines });
      inner = [...outer, nameOf(node, file)];
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(file, []);
  return found;
}

const largest = <T>(items: T[], size: (item: T) => number): T | undefined => items.reduce<T | undefined>((best, item) => (best === undefined || size(item) > size(best) ? item : best), undefined);

t.test('the checks see what they look for (on made-up sources)', async (t) => {
  const body = Array.from({ length: 130 }, (_, i) => `  const a${i} = ${i};`).join('\n');
  parse('made/up/long.ts', `export class Engine {\n  run() {\n    const step = () => {\n${body}\n    };\n  }\n}\n`);
  const measured = functionsOf('made/up/long.ts').map((fn) => `${fn.where} ${fn.name} ${fn.lines}`);
  t.same(measured, ['made/up/long.ts:2 Engine > run 134', 'made/up/long.ts:3 Engine > run > step 132'], 'methods and nested arrows are measured and named');
  parse('made/up/sql.ts', "const a = sql.type(row)`SELECT 1`;\nconst b = fetch(url);\nawait db.query(sql.unsafe`DELETE FROM x`);\nclient.query('SELECT 1');\n");
  t.same(sqlStatements('made/up/sql.ts'), [1, 3, 3, 4], 'typed and unsafe templates and query calls are found, other calls are not');
  parse('made/up/imports.ts', "import type { A } from './a.js';\nimport { type B } from './b.js';\nimport { c, type C } from './c.js';\nexport { d } from '../d.js';\nimport 'node:fs';\nconst e = await import('./e.js');\n");
  t.same(runtimeImports('made/up/imports.ts').sort(), ['made/d.ts', 'made/up/c.ts', 'made/up/e.ts'], 'type-only imports are left out, re-exports and dynamic imports kept');
  const graph = new Map([['a', ['b']], ['b', ['c']], ['c', ['a', 'd']], ['d', []], ['e', ['e']]]);
  t.same(cycles(graph).map((component) => loopThrough(component, graph)), ['a -> b -> c -> a', 'e -> e'], 'cycles are found and spelled out');
});

/** Lines of a source file, as an editor numbers them. */
const linesOf = (path: string): number => parse(path).getLineStarts().length - (parse(path).text.endsWith('\n') ? 1 : 0);

t.test('no file over 500 lines anywhere in the sources', async (t) => {
  const files = GRAPHED.flatMap(sources);
  t.ok(files.length > 100, `found the sources (${files.length} files)`);
  const longFiles = files.filter((path) => linesOf(path) > MAX_FILE_LINES).map((path) => `  ${path}: ${linesOf(path)} lines`);
  t.same(longFiles, [], `files over ${MAX_FILE_LINES} lines (cut a seam: a module per concern):\n${longFiles.join('\n')}`);
});

t.test('no file over 500 lines and no function over 120 lines in the voice engine, calls and the agent', async (t) => {
  const files = SIZED.flatMap(sources);
  t.ok(files.length > 10, `found the sources (${files.length} files)`);
  const lengths = files.map((path) => ({ path, lines: linesOf(path) }));
  const functions = files.flatMap(functionsOf);
  const longFiles = lengths.filter((file) => file.lines > MAX_FILE_LINES).map((file) => `  ${file.path}: ${file.lines} lines`);
  const longFunctions = functions
    .filter((fn) => fn.lines > MAX_FUNCTION_LINES)
    .sort((a, b) => b.lines - a.lines)
    .map((fn) => `  ${fn.where} ${fn.name}: ${fn.lines} lines`);
  const biggestFile = largest(lengths, (file) => file.lines);
  const biggestFunction = largest(functions, (fn) => fn.lines);
  t.comment(`largest file: ${biggestFile?.path} (${biggestFile?.lines} lines); largest function: ${biggestFunction?.where} ${biggestFunction?.name} (${biggestFunction?.lines} lines)`);
  t.same(longFiles, [], `files over ${MAX_FILE_LINES} lines (cut a seam: a module per concern):\n${longFiles.join('\n')}`);
  t.same(longFunctions, [], `functions over ${MAX_FUNCTION_LINES} lines (cut them into named steps):\n${longFunctions.join('\n')}`);
});

/** Where a file runs SQL: slonik `sql` tagged templates and `.query(` calls, by line. */
function sqlStatements(path: string): number[] {
  const file = parse(path);
  const lines: number[] = [];
  const rootName = (expression: ts.Expression): string | undefined => {
    if (ts.isIdentifier(expression)) return expression.text;
    if (ts.isPropertyAccessExpression(expression)) return rootName(expression.expression);
    if (ts.isCallExpression(expression)) return rootName(expression.expression);
    return undefined;
  };
  const visit = (node: ts.Node) => {
    if (ts.isTaggedTemplateExpression(node) && rootName(node.tag) === 'sql') lines.push(lineOf(file, node.getStart(file)));
    else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === 'query') lines.push(lineOf(file, node.getStart(file)));
    ts.forEachChild(node, visit);
  };
  visit(file);
  return lines;
}

t.test('SQL only in repositories and the store', async (t) => {
  const files = SQL_SCANNED.flatMap(sources);
  const placed = (path: string) => path.endsWith('/repository.ts') || path.startsWith('runtime/store/') || path in SQL_ALLOWED;
  const stray = files
    .filter((path) => !placed(path))
    .flatMap((path) => sqlStatements(path).map((line) => `  ${path}:${line}`));
  t.same(stray, [], `SQL outside a repository (move it into the resource's repository.ts):\n${stray.join('\n')}`);
  for (const path of Object.keys(SQL_ALLOWED)) t.ok(sqlStatements(path).length > 0, `${path} is allowed SQL and still holds some (else drop it from the list)`);
});

/** The modules a file imports at run time (relative specifiers resolved to project paths). */
function runtimeImports(path: string): string[] {
  const file = parse(path);
  const targets: string[] = [];
  const add = (specifier: ts.Expression | undefined) => {
    if (!specifier || !ts.isStringLiteral(specifier) || !specifier.text.startsWith('.')) return;
    const target = relative(ROOT, resolve(ROOT, dirname(path), specifier.text.replace(/\.js$/, '.ts'))).split(sep).join('/');
    targets.push(target);
  };
  for (const statement of file.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (clause?.isTypeOnly) continue;
      const bindings = clause?.namedBindings;
      const onlyTypes = clause !== undefined && !clause.name && bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((element) => element.isTypeOnly);
      if (!onlyTypes) add(statement.moduleSpecifier);
    } else if (ts.isExportDeclaration(statement) && !statement.isTypeOnly) {
      const clause = statement.exportClause;
      const onlyTypes = clause !== undefined && ts.isNamedExports(clause) && clause.elements.length > 0 && clause.elements.every((element) => element.isTypeOnly);
      if (!onlyTypes) add(statement.moduleSpecifier);
    }
  }
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node.arguments[0]);
    ts.forEachChild(node, visit);
  };
  visit(file);
  return targets;
}

/** Strongly connected components of more than one module (or a module importing itself), Tarjan's way. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const connect = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const target of graph.get(node) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        connect(target);
        low.set(node, Math.min(low.get(node)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(node, Math.min(low.get(node)!, index.get(target)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || graph.get(node)!.includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) connect(node);
  return found;
}

/** One import path through a cycle's modules, from its first back to it, for the message. */
function loopThrough(component: readonly string[], graph: ReadonlyMap<string, readonly string[]>): string {
  const members = new Set(component);
  const start = component[0]!;
  const previous = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const target of graph.get(node) ?? []) {
      if (!members.has(target)) continue;
      if (target === start) {
        const path = [start];
        for (let at: string | undefined = node; at !== undefined && at !== start; at = previous.get(at)) path.splice(1, 0, at);
        return [...path, start].join(' -> ');
      }
      if (!previous.has(target)) {
        previous.set(target, node);
        queue.push(target);
      }
    }
  }
  return component.join(', ');
}

t.test('no import cycles, and the runtime never imports the transport', async (t) => {
  const graph = new Map(GRAPHED.flatMap(sources).map((path) => [path, runtimeImports(path)] as const));
  t.ok(graph.size > 50, `built the import graph (${graph.size} modules)`);
  const found = cycles(graph).map((component) => `  ${loopThrough(component, graph)}  (${component.length} modules)`);
  t.same(found, [], `import cycles (type-only imports not counted):\n${found.join('\n')}`);
  const upward = [...graph]
    .filter(([path]) => path.startsWith('runtime/'))
    .flatMap(([path, targets]) => targets.filter((target) => target.startsWith('api/')).map((target) => `  ${path} -> ${target}`));
  t.same(upward, [], `runtime/ importing api/:\n${upward.join('\n')}`);
});
