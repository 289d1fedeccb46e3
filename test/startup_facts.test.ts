import t from 'tap';
import { loadConfig } from '../runtime/config.js';
import { startupBlock, startupFacts } from '../runtime/startup.js';
import { startTestPlatform } from './helpers/platform.js';

/**
 * What the server says when it starts:
 * 1. One line, `platform listening`, names the URL, the API reference, the offline `dev`
 *    stand-ins, the carriers and whose webhooks are taken, and whether admin routes, metrics and
 *    private outbound addresses are open.
 * 2. A configured provider moves out of the stand-ins; the switches follow the configuration.
 * 3. The block for a terminal says the same in lines, including how to stop.
 */

t.test('the start-up line names the URL, the reference, the offline stand-ins and the switches', async (t) => {
  const lines: Array<Record<string, any>> = [];
  const api = await startTestPlatform(t, { adminToken: undefined }, {}, (line) => lines.push(line));
  const listening = lines.find((line) => line.msg === 'platform listening')!;
  t.match(listening, {
    pid: process.pid,
    url: api.origin,
    apiReference: `${api.origin}/api/docs`,
    database: 'DATABASE_URL',
    search: 'PostgreSQL',
    providers: [],
    offline: ['chat: openai, groq', 'transcription: deepgram, openai, azure', 'voice: elevenlabs, openai, azure', 'realtime: openai', 'embeddings: built-in local embedder'],
    carrier: /^loopback/,
    carrierWebhooks: 'refused: twilio, telnyx, plivo, vonage (no signing secret)',
    vad: 'energy (set VOICE_VAD=silero for the neural one)',
    devVoice: 'a tone of the length of the words (set DEV_VOICE=espeak to hear them)',
    adminRoutes: 'off (set ADMIN_TOKEN)',
    outboundPrivateAddresses: 'refused',
    metrics: 'this machine only (set METRICS_TOKEN)',
    shutdownGraceSeconds: 30,
  });
  t.equal((await api.request('GET', '/docs')).status, 200, 'the reference it names is there');
});

t.test('configured providers and switches are said as they are', async (t) => {
  const config = loadConfig({ PLIVO_AUTH_ID: 'MA1', PLIVO_AUTH_TOKEN: 'secret', TWILIO_AUTH_TOKEN: 'tw', ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: 'true', VOICE_VAD: 'silero', GROQ_API_KEY: 'gsk', DEEPGRAM_API_KEY: 'dg', ADMIN_TOKEN: 'an-admin-token-0123', OUTBOUND_ALLOW_PRIVATE: 'true', METRICS_TOKEN: 'm', SHUTDOWN_GRACE_SECONDS: '45', EMBEDDINGS_BASE_URL: 'https://api.openai.com/v1' });
  const facts = startupFacts(config, 'https://voice.example.com', '/var/lib/ap/postgres');
  t.match(facts, {
    database: 'embedded PostgreSQL in /var/lib/ap/postgres',
    providers: ['chat: groq', 'transcription: deepgram', 'embeddings: text-embedding-3-small'],
    offline: ['chat: openai', 'transcription: openai, azure', 'voice: elevenlabs, openai, azure', 'realtime: openai'],
    carrier: 'plivo',
    devVoice: 'espeak-ng (offline speech, in a worker thread)',
    carrierWebhooks: 'signed: twilio, plivo; UNSIGNED ACCEPTED: telnyx, vonage (ACCEPT_UNSIGNED_CARRIER_WEBHOOKS: anyone can post them)',
    adminRoutes: 'on',
    outboundPrivateAddresses: 'allowed',
    metrics: 'token required',
    shutdownGraceSeconds: 45,
  });
  const transcribing = startupFacts(loadConfig({ OPENAI_TRANSCRIBE_BASE_URL: 'http://whisper:8080/v1', OPENAI_TRANSCRIBE_MODEL: 'whisper-1', AZURE_OPENAI_ENDPOINT: 'https://res.openai.azure.com', AZURE_OPENAI_API_KEY: 'az', AZURE_OPENAI_TRANSCRIBE_DEPLOYMENT: 'whisper' }), 'https://voice.example.com', undefined);
  t.match(transcribing, { providers: ['transcription: openai, azure'] }, 'the openai and azure transcribers served for real once configured');
  const block = startupBlock(facts);
  t.match(block, /^Assistant Platform listening on https:\/\/voice\.example\.com\n/);
  t.match(block, /API reference +https:\/\/voice\.example\.com\/api\/docs/);
  t.match(block, /offline stand-ins +chat: openai; transcription: openai, azure; voice: elevenlabs, openai, azure; realtime: openai \(the dev providers/);
  t.match(block, /voice activity +silero \(neural, in a worker thread\)/);
  t.match(block, /dev voice +espeak-ng \(offline speech, in a worker thread\)/);
  t.match(block, /carrier webhooks +signed: twilio, plivo; UNSIGNED ACCEPTED/);
  t.match(block, /SIGTERM or Ctrl-C: live calls get 45 s to finish \(SHUTDOWN_GRACE_SECONDS\); a second signal ends them at once/);
});
