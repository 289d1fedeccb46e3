import type { FirstByteProbe, TtsProvider, TtsRequest } from './types.js';
import { guardedSpeech, TTS_STALL_MS } from './wire.js';

/** ElevenLabs streaming TTS: `POST /v1/text-to-speech/{voice}/stream?output_format=pcm_16000`. */
export function createElevenLabsTts(settings: { apiKey: string; url: string; model?: string; stallMs?: number }, probe?: FirstByteProbe): TtsProvider {
  return {
    name: 'elevenlabs',
    async *synthesize(request: TtsRequest) {
      const started = performance.now();
      const audio = guardedSpeech('ElevenLabs', request, settings.stallMs ?? TTS_STALL_MS, (signal) => fetch(`${settings.url}/v1/text-to-speech/${encodeURIComponent(request.voice)}/stream?output_format=pcm_16000`, {
        method: 'POST',
        headers: { 'xi-api-key': settings.apiKey, 'content-type': 'application/json', accept: 'audio/pcm' },
        body: JSON.stringify({
          text: request.text,
          model_id: settings.model ?? 'eleven_flash_v2_5',
          language_code: request.language,
          voice_settings: { stability: request.stability, similarity_boost: request.similarity, style: request.emotion ? 0.3 : 0, use_speaker_boost: true, speed: request.speed },
        }),
        signal,
      }));
      let first = true;
      for await (const chunk of audio) {
        if (first) probe?.('tts', 'elevenlabs', performance.now() - started);
        first = false;
        yield chunk;
      }
    },
  };
}
