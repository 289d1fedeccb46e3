// A speech synthesis worker whose synthesizer cannot load (as when the espeak-ng package is
// missing or its WebAssembly fails), for the dev voice's fallback test.
throw new Error('espeak-ng could not be loaded');
