import { createReadStream } from 'node:fs';
import type { CallService } from '../../runtime/calls/service.js';
import { StreamBody, type RouteDefinition } from '../http/types.js';
import { media } from '../http/contract.js';

/**
 * `GET {base_url}/recordings/{call_id}.wav?expires=..&signature=..`: the call's recording, with
 * byte ranges (`Range: bytes=a-b`, `bytes=a-`, `bytes=-n`) answered 206 with `Content-Range`, and
 * 416 when unsatisfiable. A wrong or expired signature is 403; a call without a recording 404.
 * The file is streamed (a 20-minute call is 77 MB), never read into memory whole.
 */

export function recordingRoutes(calls: CallService): RouteDefinition[] {
  return [
    {
      method: 'GET',
      path: '/api/recordings/:file',
      auth: 'none',
      tag: 'Calls',
      summary: 'A call recording (stereo WAV: caller left, agent right) at its signed, expiring URL; byte ranges supported',
      errors: [403, 404],
      responses: {
        200: media('audio/wav', 'The recording'),
        206: media('audio/wav', 'The range asked for (Content-Range)'),
        416: media('audio/wav', 'The range cannot be satisfied (empty body; Content-Range: bytes */size)'),
      },
      async handler(req) {
        const match = /^(\d+)\.wav$/.exec(req.params.file ?? '');
        const query = new URLSearchParams(req.rawQuery);
        const callId = Number(match?.[1]);
        const { path, size } = await calls.recording(callId, Number(query.get('expires')), query.get('signature') ?? '');
        const headers: Record<string, string> = { 'Content-Type': 'audio/wav', 'Accept-Ranges': 'bytes', 'Cache-Control': 'private, max-age=3600', 'Content-Disposition': `inline; filename="call-${callId}.wav"` };
        let start = 0;
        let end = size - 1;
        let partial = false;
        const range = req.headers.range;
        if (range) {
          const parsed = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
          if (!parsed || (parsed[1] === '' && parsed[2] === '')) return { status: 416, body: '', headers: { ...headers, 'Content-Range': `bytes */${size}` } };
          if (parsed[1] === '') start = Math.max(0, size - Number(parsed[2]));
          else {
            start = Number(parsed[1]);
            if (parsed[2] !== '') end = Math.min(end, Number(parsed[2]));
          }
          if (start >= size || start > end) return { status: 416, body: '', headers: { ...headers, 'Content-Range': `bytes */${size}` } };
          partial = true;
        }
        const length = Math.max(0, end - start + 1);
        if (partial) headers['Content-Range'] = `bytes ${start}-${end}/${size}`;
        const body = new StreamBody(length, async function* () {
          if (length > 0) yield* createReadStream(path, { start, end, highWaterMark: 256 * 1024 }) as AsyncIterable<Buffer>;
        });
        return { status: partial ? 206 : 200, body, headers };
      },
    },
  ];
}
