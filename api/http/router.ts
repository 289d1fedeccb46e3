import type { RouteDefinition } from './types.js';

/**
 * Method + path router over a segment trie. Static segments win over `:param` segments, so
 * `/user/phone-numbers/all` and `/user/phone-numbers/:id` coexist. Lookup is one map hit per
 * segment; parameters are percent-decoded.
 */

interface Node {
  readonly statics: Map<string, Node>;
  param: { name: string; node: Node } | undefined;
  readonly routes: Map<string, RouteDefinition>;
}

const node = (): Node => ({ statics: new Map(), param: undefined, routes: new Map() });

export type Match =
  | { readonly kind: 'found'; readonly route: RouteDefinition; readonly params: Record<string, string> }
  | { readonly kind: 'method_not_allowed'; readonly allowed: string[] }
  | { readonly kind: 'not_found' };

function segments(path: string): string[] {
  return path.split('/').filter((part) => part !== '');
}

export class Router {
  private readonly root = node();
  private readonly all: RouteDefinition[] = [];

  add(route: RouteDefinition): void {
    let current = this.root;
    for (const segment of segments(route.path)) {
      if (segment.startsWith(':')) {
        const name = segment.slice(1);
        if (current.param && current.param.name !== name) {
          throw new Error(`route ${route.path}: parameter :${name} conflicts with :${current.param.name}`);
        }
        current.param ??= { name, node: node() };
        current = current.param.node;
      } else {
        let next = current.statics.get(segment);
        if (!next) current.statics.set(segment, (next = node()));
        current = next;
      }
    }
    if (current.routes.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`);
    current.routes.set(route.method, route);
    this.all.push(route);
  }

  routes(): readonly RouteDefinition[] {
    return this.all;
  }

  match(method: string, path: string): Match {
    const params: Record<string, string> = {};
    const found = this.walk(this.root, segments(path), 0, params);
    if (!found || found.routes.size === 0) return { kind: 'not_found' };
    const route = found.routes.get(method);
    if (!route) return { kind: 'method_not_allowed', allowed: [...found.routes.keys()] };
    return { kind: 'found', route, params };
  }

  private walk(current: Node, parts: string[], index: number, params: Record<string, string>): Node | undefined {
    if (index === parts.length) return current;
    const part = parts[index]!;
    const next = current.statics.get(part);
    if (next) {
      const found = this.walk(next, parts, index + 1, params);
      if (found && found.routes.size > 0) return found;
    }
    if (current.param) {
      let value: string;
      try {
        value = decodeURIComponent(part);
      } catch {
        return undefined;
      }
      const found = this.walk(current.param.node, parts, index + 1, params);
      if (found) {
        params[current.param.name] = value;
        return found;
      }
    }
    return undefined;
  }
}
