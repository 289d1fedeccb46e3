/**
 * Short phrases a pipeline call speaks while the caller would otherwise hear silence (the `fillers`
 * setting): `wait` while the model has not begun its answer, `tool` while a function it called is
 * still running. Each language of the catalog has its own; the voice speaks the call's current
 * language, so a phrase in another one would be worse than the silence it fills.
 */

export type FillerKind = 'wait' | 'tool';

const FILLERS: Readonly<Record<string, Readonly<Record<FillerKind, readonly string[]>>>> = {
  en: { wait: ['One moment.', 'Let me see.', 'Sure, just a second.'], tool: ['Let me check that.', 'One moment while I look that up.', "Just a second, I'm checking."] },
  de: { wait: ['Einen Moment.', 'Mal sehen.', 'Einen Augenblick, bitte.'], tool: ['Ich schaue kurz nach.', 'Einen Moment, ich prüfe das.', 'Ich sehe das kurz nach.'] },
  fr: { wait: ['Un instant.', 'Voyons voir.', 'Une seconde, s’il vous plaît.'], tool: ['Je vérifie.', 'Un instant, je regarde.', 'Je vérifie cela tout de suite.'] },
  es: { wait: ['Un momento.', 'Déjeme ver.', 'Un segundo, por favor.'], tool: ['Lo compruebo ahora mismo.', 'Un momento, lo estoy revisando.', 'Déjeme comprobarlo.'] },
  it: { wait: ['Un momento.', 'Vediamo.', 'Un secondo, per favore.'], tool: ['Controllo subito.', 'Un attimo, sto verificando.', 'Mi lasci controllare.'] },
  pt: { wait: ['Um momento.', 'Deixe-me ver.', 'Só um segundo.'], tool: ['Vou verificar.', 'Um momento, estou verificando.', 'Deixe-me conferir.'] },
  nl: { wait: ['Een moment.', 'Even kijken.', 'Een ogenblikje.'], tool: ['Ik kijk het even na.', 'Een moment, ik controleer het.', 'Ik zoek het even op.'] },
  pl: { wait: ['Chwileczkę.', 'Zobaczmy.', 'Moment, proszę.'], tool: ['Już sprawdzam.', 'Chwileczkę, sprawdzam.', 'Sprawdzam to.'] },
  fi: { wait: ['Hetkinen.', 'Katsotaanpa.', 'Hetki vain.'], tool: ['Tarkistan asian.', 'Hetkinen, tarkistan.', 'Katson sen heti.'] },
  da: { wait: ['Et øjeblik.', 'Lad mig se.', 'Et sekund.'], tool: ['Jeg tjekker det lige.', 'Et øjeblik, jeg kigger på det.', 'Lad mig lige tjekke.'] },
  sv: { wait: ['Ett ögonblick.', 'Låt mig se.', 'En sekund bara.'], tool: ['Jag kollar det.', 'Ett ögonblick, jag kontrollerar.', 'Jag tittar på det direkt.'] },
  no: { wait: ['Et øyeblikk.', 'La meg se.', 'Et sekund.'], tool: ['Jeg sjekker det.', 'Et øyeblikk, jeg ser på det.', 'La meg sjekke.'] },
  he: { wait: ['רגע אחד.', 'רק שנייה.', 'רגע, בבקשה.'], tool: ['רק רגע, בודקים.', 'רגע, בודקים את זה.', 'בודקים את זה עכשיו.'] },
  ar: { wait: ['لحظة من فضلك.', 'لحظة واحدة.', 'ثانية واحدة من فضلك.'], tool: ['سأتحقق من ذلك.', 'لحظة، أتحقق من ذلك.', 'سأتحقق الآن.'] },
  hi: { wait: ['एक पल।', 'ज़रा देखने दीजिए।', 'बस एक सेकंड।'], tool: ['एक पल, जाँच हो रही है।', 'अभी देखते हैं।', 'ज़रा रुकिए, जानकारी देख रहे हैं।'] },
  ja: { wait: ['少々お待ちください。', 'はい、少々お待ちください。', '少しお待ちください。'], tool: ['確認いたします。', 'お調べしますので、少々お待ちください。', '確認しますね。'] },
  ko: { wait: ['잠시만요.', '음, 잠시만요.', '잠깐만 기다려 주세요.'], tool: ['확인해 보겠습니다.', '잠시만요, 확인 중입니다.', '바로 확인해 드릴게요.'] },
  zh: { wait: ['请稍等。', '我看一下。', '稍等一下。'], tool: ['我帮您查一下。', '请稍等，正在查询。', '我确认一下。'] },
  ru: { wait: ['Одну минуту.', 'Сейчас посмотрим.', 'Секундочку.'], tool: ['Сейчас проверю.', 'Минутку, проверяю.', 'Давайте я уточню.'] },
  tr: { wait: ['Bir saniye.', 'Bakalım.', 'Bir dakika lütfen.'], tool: ['Hemen kontrol ediyorum.', 'Bir saniye, kontrol ediyorum.', 'Hemen bakıyorum.'] },
  uk: { wait: ['Одну хвилинку.', 'Зараз подивимося.', 'Секундочку.'], tool: ['Зараз перевірю.', 'Хвилинку, перевіряю.', 'Дозвольте уточнити.'] },
  cs: { wait: ['Okamžik.', 'Podívám se.', 'Vteřinku.'], tool: ['Hned to ověřím.', 'Okamžik, ověřuji.', 'Podívám se na to.'] },
  el: { wait: ['Μια στιγμή.', 'Για να δούμε.', 'Ένα λεπτό.'], tool: ['Το ελέγχω αμέσως.', 'Μια στιγμή, το ελέγχω.', 'Επιτρέψτε μου να ελέγξω.'] },
  ro: { wait: ['Un moment.', 'Să vedem.', 'O secundă, vă rog.'], tool: ['Verific imediat.', 'Un moment, verific.', 'Să verific.'] },
};

/** The languages (ISO 639-1) that have fillers. */
export const FILLER_LANGUAGES: readonly string[] = Object.keys(FILLERS);

/** A filler in `language`, varied by `seed` (the call id), or undefined for a language without any. */
export function filler(language: string, kind: FillerKind, seed: number): string | undefined {
  const phrases = Object.hasOwn(FILLERS, language) ? FILLERS[language]![kind] : undefined;
  return phrases?.[seed % phrases.length];
}
