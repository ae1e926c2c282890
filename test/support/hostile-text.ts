/** Hostile text for the tests of what a person sees: escapes, controls, bidi overrides. */

/** Anything a terminal could take as other than plain text. */
export const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;

/** Hostile strings, and what a person must see of each. */
export const HOSTILE: readonly (readonly [string, string, string])[] = [
  ['OSC window title', 'ses-\x1b]0;pwned\x07', 'ses-\\x1b]0;pwned\\x07'],
  [
    'OSC 8 hyperlink',
    '\x1b]8;;http://evil/\x1b\\click\x1b]8;;\x1b\\',
    '\\x1b]8;;http://evil/\\x1b\\click\\x1b]8;;\\x1b\\',
  ],
  ['SGR colours', '\x1b[31mred\x1b[0m', '\\x1b[31mred\\x1b[0m'],
  ['clear screen and home', 'a\x1b[2J\x1b[Hb', 'a\\x1b[2J\\x1b[Hb'],
  ['carriage return overwriting the line', 'req-1\rOK   ', 'req-1\\rOK   '],
  ['line feed forging a line', 'req-1\nw2  ready', 'req-1\\nw2  ready'],
  ['tab', 'a\tb', 'a\\tb'],
  ['NUL, BEL, backspace, DEL', '\x00\x07\x08\x7f', '\\x00\\x07\\x08\\x7f'],
  ['C1 CSI (8-bit)', 'x\x9b31my', 'x\\x9b31my'],
  ['C1 NEL and OSC', '\x85\x9d', '\\x85\\x9d'],
  ['bidi right-to-left override', 'evil\u202etxt.exe', 'evil\\u{202e}txt.exe'],
  [
    'bidi isolates and marks',
    '\u2066a\u2069\u200e\u200f\u061c',
    '\\u{2066}a\\u{2069}\\u{200e}\\u{200f}\\u{061c}',
  ],
  ['zero-width space and joiner, BOM', 'a\u200bb\u200dc\ufeff', 'a\\u{200b}b\\u{200d}c\\u{feff}'],
  ['line and paragraph separators', 'a\u2028b\u2029c', 'a\\u{2028}b\\u{2029}c'],
  ['a lone surrogate', 'a\ud800b', 'a\\u{d800}b'],
  [
    'plain text of any script (kept as it is)',
    'café 模型 😀 ckpt-numpy',
    'café 模型 😀 ckpt-numpy',
  ],
];
