import { SAMPLE_RATE } from '../audio.js';
import { Resampler, type FirstByteProbe, type TtsProvider, type TtsRequest } from './types.js';
import { guardedSpeech, TTS_STALL_MS } from './wire.js';

/** OpenAI TTS: `POST /v1/audio/speech`, `response_format: pcm`, 24 kHz resampled to 16 kHz. */
export function createOpenAiTts(settings: { apiKey: string; url: string; model?: string; stallMs?: number }, probe?: FirstByteProbe): TtsProvider {
  return {
    name: 'openai',
    async *synthesize(request: TtsRequest) {
      const started = performance.now();
      const audio = guardedSpeech('OpenAI TTS', request, settings.stallMs ?? TTS_STALL_MS, (signal) => fetch(`${settings.url}/audio/speech`, {
        method: 'POST',
        headers: { authorization: `Bearer ${settings.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: settings.model ?? 'gpt-4o-mini-tts',
          input: request.text,
          voice: request.voice,
          response_format: 'pcm',
          speed: request.speed,
          ...(request.emotion ? { instructions: 'Speak warmly and expressively.' } : {}),
        }),
        signal,
      }));
      const resampler = new Resampler(24_000, SAMPLE_RATE);
      let first = true;
      for await (const chunk of audio) {
        if (first) probe?.('tts', 'openai', performance.now() - started);
        first = false;
        yield resampler.process(chunk);
      }
    },
  };
}
