// SPDX-License-Identifier: MIT
// A deterministic (seeded) corpus of varied strings for the exact-token
// tests and benchmarks: English, code, emoji, CJK, other scripts with
// combining marks, numbers and dates, white-space runs, mixed case, random
// code points, and long pieces. makeCorpus(seed, n) returns n strings.
'use strict';

function mulberry32(seed) {
  let a = seed >>> 0;
  return function () {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ('the of and to in is it you that he was for on are with as I his they be at one have ' +
  'this from or had by hot word but what some we can out other were all there when up use your how ' +
  'said an each she which do their time if will way about many then them write would like so these ' +
  'her long make thing see him two has look more day could go come did number sound no most people ' +
  'my over know water than call first who may down side been now find memory session summary ' +
  'tokenizer agent context budget window conversation assistant internationalization ' +
  'antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis serendipity ' +
  'Paris London Tokyo Ada Lovelace Alan Turing Grace Hopper OpenAI GPT Wednesday January').split(' ');
const CONTRACTIONS = ["don't", "I'm", "you're", "we've", "they'll", "she'd", "it's", "can't",
  "DON'T", "I'M", "YOU'RE", "We'Ve", "They'LL", "O'Neil", "rock'n'roll", "'tis", "y'all"];
const PUNCT = ['.', ',', '!', '?', ';', ':', '...', ' -', ' --', '—', '…', '?!', '"', "'", '(', ')'];
const CODE = [
  'int main(int argc, char **argv) {', '    return 0;', '}', 'for (size_t i = 0; i < n; i++)',
  'def fetch_user(user_id: int) -> dict:', '\treturn {"id": user_id, "name": None}',
  'const x = await fetch(`/api/v1/users/${id}`);', 'if (a && b || !c) { x += 0x7fff; }',
  'SELECT id, name FROM users WHERE created_at > \'2024-01-01\' ORDER BY id DESC LIMIT 10;',
  '#include <stdio.h>', '// TODO(ada): handle EINTR', '/* multi\n * line\n */',
  'getHTTPResponseCode(URLSession.shared)', 'XMLHttpRequest', 'snake_case_identifier_42',
  'kebab-case-name', 'std::vector<std::string> v{"a", "b"};', 'x=>x*2', 'a!==b', '$$', '@@ -1,4 +1,5 @@',
  'import numpy as np\nnp.zeros((3, 4), dtype=np.float32)', '{"key": [1, 2.5, -3e10, true, null]}',
  '    \t  indented_with_mixed_whitespace()', 'http://example.com/path?q=1&r=%20#frag',
  'C:\\Users\\ada\\file.txt', '<div class="row"><span>hi</span></div>', 'λx.λy.x', 'a/b/c//d///e',
];
const EMOJI = ['😀', '😂', '🥲', '👍', '👍🏽', '❤️', '🔥', '🚀', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇯🇵', '🇫🇷',
  '1️⃣', '#️⃣', '✅', '☕', '🧑🏿‍🚀', '🐍', '🦀', '✨', '🙏', '💯', '🫠'];
const CJK_PUNCT = ['。', '、', '「', '」', '！', '？', '：', '（', '）', '・', '〜'];
const SCRIPTS = [
  'Привет, как дела? Москва 2024', 'Γειά σου Κόσμε', 'مرحبا بالعالم ١٢٣', 'שלום עולם',
  'नमस्ते दुनिया', 'สวัสดีชาวโลก', 'Tiếng Việt có dấu', 'Ελληνικά και ΚΕΦΑΛΑΙΑ',
  'naïve café résumé coöperate', 'cafe\u0301 nai\u0308ve', 'Straße ÄÖÜ ß', 'ǅungla ǈudevit',
  'ʻOkina ʼApostrophe', 'ⅩⅡ Ⅻ ⅻ', '１２３ ＡＢＣ ａｂｃ', '²³ ½ ¾ ①②③', 'ℌℑℜ ℵ', 'ﬁ ﬂ ﬀ',
  'İstanbul ıI', 'ԱԲԳ Հայերեն', 'ქართული', 'አማርኛ', '한국어 텍스트입니다', 'ᄀᄁ ᅡᅢ',
];
const WS = [' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', ' \n ', '\u00a0', '\u3000', '\u2003',
  '\u2009', '\v', '\f', '\u2028', '\u0085', '\ufeff', '\t\t', '    ', '\n   ', ' \r\n\t'];
const RANGES = [[0x20, 0x7e], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x5ff],
  [0x600, 0x6ff], [0x900, 0x97f], [0x2000, 0x206f], [0x2190, 0x22ff], [0x3000, 0x30ff],
  [0x4e00, 0x9fa5], [0xac00, 0xd7a3], [0x1f300, 0x1f5ff], [0x300, 0x36f]];
const ASSIGNED = /^\P{Cn}$/u;

export function makeCorpus(seed, n) {
  const rnd = mulberry32(seed);
  const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const rep = (k, f) => Array.from({ length: k }, f).join('');

  const sentence = () => {
    const k = int(3, 18);
    let s = '';
    for (let i = 0; i < k; i++) {
      let w = rnd() < 0.1 ? pick(CONTRACTIONS) : pick(WORDS);
      if (i === 0 || rnd() < 0.05)
        w = w[0].toUpperCase() + w.slice(1);
      if (rnd() < 0.03)
        w = w.toUpperCase();
      s += (i ? ' ' : '') + w;
      if (rnd() < 0.08)
        s += pick(PUNCT);
      if (rnd() < 0.05)
        s += ' ' + int(0, 100000);
    }
    return s + pick(['.', '!', '?', '.', '']);
  };
  const han = () => rep(int(1, 20), () => String.fromCodePoint(int(0x4e00, 0x9fa5)));
  const kana = () => rep(int(1, 12), () => String.fromCodePoint(int(0x3041, 0x3093)));
  const hangul = () => rep(int(1, 10), () => String.fromCodePoint(int(0xac00, 0xd7a3)));
  const cjk = () => rep(int(1, 6), () => pick([han, kana, hangul])() + (rnd() < 0.6 ? pick(CJK_PUNCT) : ''));
  const randomCp = () => {
    for (;;) {
      const [lo, hi] = pick(RANGES);
      const s = String.fromCodePoint(int(lo, hi));
      if (ASSIGNED.test(s))
        return s;
    }
  };
  const numbers = () => pick([
    () => String(int(0, 1e9)) + rep(int(0, 3), () => String(int(0, 9999))),
    () => `${int(1900, 2100)}-${String(int(1, 12)).padStart(2, '0')}-${String(int(1, 28)).padStart(2, '0')}`,
    () => `${int(0, 23)}:${String(int(0, 59)).padStart(2, '0')} on ${pick(WORDS)} ${int(1, 31)}, ${int(1990, 2030)}`,
    () => `$${int(0, 99999)}.${String(int(0, 99)).padStart(2, '0')} (${int(0, 100)}%)`,
    () => `+1 (${int(200, 999)}) ${int(200, 999)}-${int(1000, 9999)}`,
    () => `${rnd() * 1e6} ${-rnd()} ${int(0, 9)}e-${int(1, 30)}`,
    () => '٠١٢٣٤٥٦٧٨٩ ' + '०१२३ ' + '１２３４５',
  ])();
  const whitespace = () => rep(int(1, 8), () => pick(WS) + (rnd() < 0.5 ? pick(WORDS) : ''));
  const code = () => rep(int(1, 6), () => pick(CODE) + pick(['\n', '\n    ', '\n\t', ' ', '\r\n']));
  const emoji = () => rep(int(1, 8), () => pick(EMOJI) + (rnd() < 0.4 ? ' ' + pick(WORDS) : ''));
  const mixedCase = () => rep(int(1, 6), () => pick(['HTTPServer', 'getHTTPResponseCode', 'McDonald\'s',
    'iPhone', 'ALLCAPS', 'camelCaseWord', 'PascalCase', 'ABCdef', 'aBcDeF', 'DŽungla', 'ǅemal',
    'ÀÉÎÕÜ', 'àéîõü', 'ΑβΓδ', 'ПрИвЕт', 'I\'M', 'WE\'LL']) + pick([' ', '', '_', '.']));
  const randomText = () => rep(int(1, 40), randomCp);
  const long = () => pick([
    () => 'a'.repeat(int(100, 600)),
    () => rep(int(15, 50), () => pick(WORDS)),
    () => ' '.repeat(int(50, 400)) + pick(WORDS),
    () => String(int(1, 9)).repeat(int(100, 1000)),
    () => rep(int(20, 80), () => pick(EMOJI)),
    () => rep(int(5, 15), han),
    () => rep(int(100, 400), randomCp),
    () => '\n'.repeat(int(10, 200)) + 'x' + '\t'.repeat(int(10, 200)),
    () => rep(int(20, 80), sentence),
  ])();
  const special = () => pick(['<|endoftext|>', 'a<|endoftext|>b', '<|fim_prefix|>x<|fim_suffix|>',
    '<|endofprompt|>', '<|im_start|>user']);

  const kinds = [
    [sentence, 30], [code, 12], [emoji, 8], [cjk, 8], [whitespace, 10], [numbers, 8],
    [() => pick(SCRIPTS), 6], [mixedCase, 6], [randomText, 8], [long, 2], [special, 1],
    [() => rep(int(2, 5), () => pick([sentence, code, emoji, cjk, whitespace, numbers, randomText])()), 8],
  ];
  const total = kinds.reduce((a, [, w]) => a + w, 0);
  const out = ['', ' ', '\n', 'a', "'s", ' 123', '  hello  ', '\r\n\r\n', '\u00a0\u00a0x'];
  while (out.length < n) {
    let r = rnd() * total;
    for (const [f, w] of kinds) {
      r -= w;
      if (r < 0) {
        out.push(f());
        break;
      }
    }
  }
  return out.slice(0, n);
}
