/**
 * The API reference for people (`/api/docs`): a self-contained page (no CDN) that reads
 * `/api/openapi.json` and shows each operation with its parameters, its request fields and every
 * answer with its fields and their descriptions, then the realtime sockets (`x-websockets`) with
 * the frames each side sends.
 */
export const DOCS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Assistant Platform API</title>
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:1040px;padding:24px;color:#1d2330}
h1{margin:0 0 4px}h2{margin:32px 0 8px;border-bottom:1px solid #dde}h4{margin:10px 0 4px}
details{border:1px solid #dde;border-radius:6px;margin:6px 0;padding:6px 10px}
summary{cursor:pointer}code{font:13px ui-monospace,monospace}
table{border-collapse:collapse;width:100%;margin:4px 0}td{border-top:1px solid #eef;padding:3px 6px;vertical-align:top;font-size:14px}
td:first-child{white-space:nowrap}td.t{color:#555;max-width:240px;overflow-wrap:anywhere}
.m{display:inline-block;min-width:64px;font-weight:600}.GET{color:#16794c}.POST{color:#1f5fbf}.PUT,.PATCH{color:#9a6700}.DELETE{color:#b42318}
</style></head><body>
<h1>Assistant Platform API</h1><p id="intro">Loading <a href="/api/openapi.json">/api/openapi.json</a>…</p><main id="ops"></main>
<script>
const el=(tag,text,cls)=>{const e=document.createElement(tag);if(text!==undefined)e.textContent=text;if(cls)e.className=cls;return e;};
const typeOf=(s)=>{if(!s)return'';if(s.const!==undefined)return JSON.stringify(s.const);if(s.enum)return s.enum.map(v=>JSON.stringify(v)).join(' | ');
  if(s.anyOf)return s.anyOf.map(typeOf).join(' | ');const t=[].concat(s.type||'any').join(' | ');return s.type==='array'||(Array.isArray(s.type)&&s.type.includes('array'))?'array of '+(typeOf(s.items)||'any'):t;};
function rows(table,schema,prefix){
  const props=schema&&schema.properties;if(!props)return;const req=new Set(schema.required||[]);
  for(const [name,s] of Object.entries(props)){
    const tr=el('tr');const n=el('td');n.append(el('code',prefix+name));if(!req.has(name))n.append(' (optional)');
    tr.append(n,el('td',typeOf(s),'t'),el('td',s.description||''));table.append(tr);
    if(s.properties)rows(table,s,prefix+name+'.');
    const item=s.items||(s.anyOf||[]).find(x=>x.items)?.items;if(item&&item.properties)rows(table,item,prefix+name+'[].');
  }
}
function fields(parent,title,schema){
  parent.append(el('h4',title));if(schema&&schema.description)parent.append(el('div',schema.description));
  let shown=schema;if(schema&&schema.type==='array'&&schema.items){parent.append(el('div','A JSON array of:'));shown=schema.items;}
  const table=el('table');rows(table,shown,'');if(table.childElementCount)parent.append(table);
}
fetch('/api/openapi.json').then(r=>r.json()).then(doc=>{
  document.getElementById('intro').innerHTML=doc.info.description.replace(/\`([^\`]*)\`/g,'<code>$1</code>')+' Base URL: <code>'+doc.servers[0].url+'</code>. Machine-readable: <a href="/api/openapi.json">openapi.json</a>.';
  const groups={};
  for(const [path,ops] of Object.entries(doc.paths))for(const [method,op] of Object.entries(ops))(groups[op.tags[0]]??=[]).push({path,method:method.toUpperCase(),op});
  const main=document.getElementById('ops');
  for(const [tag,items] of Object.entries(groups)){
    main.append(el('h2',tag));
    for(const {path,method,op} of items){
      const d=el('details');const s=el('summary');s.append(el('span',method,'m '+method),' ',el('code',path),' — '+op.summary);d.append(s);
      if(op.security)d.append(el('div','Authentication: '+(op.security.some(x=>Object.keys(x).length===0)?'optional bearer token':op.security.map(x=>Object.keys(x)[0]==='adminToken'?'operator token':'bearer token').join(', '))));
      if(op.parameters.length){const table=el('table');for(const p of op.parameters){const tr=el('tr');const n=el('td');n.append(el('code',p.name),' ('+p.in+(p.required?'':', optional')+')');tr.append(n,el('td',typeOf(p.schema),'t'),el('td',p.description||''));table.append(tr);}d.append(el('h4','Parameters'),table);}
      const rb=op.requestBody&&op.requestBody.content;if(rb)fields(d,'Request body ('+Object.keys(rb).join(', ')+')',(rb['application/json']||Object.values(rb)[0]).schema);
      for(const [status,r] of Object.entries(op.responses)){
        const c=r.content||{};const type=Object.keys(c)[0];
        if(type==='application/json')fields(d,status+' — '+r.description,c[type].schema);
        else d.append(el('h4',status+' — '+r.description+(type?' ('+type+')':' (no body)')));
      }
      main.append(d);
    }
  }
  main.append(el('h2','Realtime sockets'));
  for(const sock of doc['x-websockets']||[]){
    const d=el('details');const s=el('summary');s.append(el('span','WS','m'),' ',el('code',sock.path),' — '+sock.summary);d.append(s,el('p',sock.description));
    for(const [side,frames] of [['Client sends',sock.client],['Server sends',sock.server]])for(const [type,schema] of Object.entries(frames))fields(d,side+': '+type,schema);
    main.append(d);
  }
});
</script></body></html>`;
