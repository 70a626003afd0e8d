// acme/wordcount: a third-party chitin tool written in JavaScript.
//
// It targets chitin's `tool-component` world (wit/worlds.wit) and exports the `tool` interface:
// `specs()` lists the tools this component carries, and `call(name, argsJson)` runs one with its
// arguments as JSON text and returns its result as JSON text. componentize-js maps WIT names to
// camelCase (`input-schema` → `inputSchema`), `option<T>` to a value or `undefined`, and a
// `result<string, tool-error>` to "return the ok string, or throw the error": a thrown value with
// a `payload` property sends that payload as the `err` case, here a `tool-error` variant
// (`{ tag: 'invalid-args', val: '…' }`).
//
// Built by plain `jco componentize` (see `just build-thirdparty`), WASI left on: the component
// imports the standard WASI interfaces the JavaScript engine uses (clocks, randomness, stdio,
// `fetch` over `wasi:http`). Its manifest asks for no capability, so chitin links them with
// every use that would reach outside refused: `fetch` gets a refusal, there are no files.

/** A `tool-error` to throw from `call`; componentize-js returns `payload` as the `err` case. */
class ToolError extends Error {
  constructor(tag, message) {
    super(message);
    this.payload = { tag, val: message };
  }
}

const inputSchema = {
  type: 'object',
  properties: {
    text: { type: 'string', description: 'The text to count words, lines and characters of' },
  },
  required: ['text'],
  additionalProperties: false,
};

const outputSchema = {
  type: 'object',
  properties: {
    words: {
      type: 'integer',
      minimum: 0,
      description: 'Runs of non-whitespace characters',
    },
    lines: {
      type: 'integer',
      minimum: 0,
      description: 'Lines: 0 for empty text, else the line breaks plus one unless the text ends with one',
    },
    chars: {
      type: 'integer',
      minimum: 0,
      description: 'Unicode code points (not bytes, not UTF-16 units)',
    },
  },
  required: ['words', 'lines', 'chars'],
  additionalProperties: false,
};

/** Whether the UTF-16 unit `c` is whitespace as JavaScript's `\s` defines it. */
function isSpace(c) {
  return (c >= 0x09 && c <= 0x0d) || c === 0x20 || c === 0xa0 || c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f ||
    c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/**
 * Count the words, lines and characters of `text` in one pass, allocating nothing: the default
 * policy gives a call 10 MiB of memory, and the JavaScript engine itself takes most of it.
 */
function wordCount(text) {
  let words = 0;
  let breaks = 0;
  let chars = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // A low surrogate after a high one is the second half of one code point.
    if (!(c >= 0xdc00 && c <= 0xdfff && i > 0 && (text.charCodeAt(i - 1) & 0xfc00) === 0xd800)) chars++;
    if (c === 0x0a || (c === 0x0d && text.charCodeAt(i + 1) !== 0x0a)) breaks++; // \n, \r\n, \r
    if (isSpace(c)) {
      inWord = false;
    } else if (!inWord) {
      inWord = true;
      words++;
    }
  }
  const last = text.charCodeAt(text.length - 1);
  const lines = text.length === 0 ? 0 : breaks + (last === 0x0a || last === 0x0d ? 0 : 1);
  return { words, lines, chars };
}

/** Parse and check the `word_count` arguments, or throw `invalid-args` naming what is wrong. */
function parseArgs(argsJson) {
  let args;
  try {
    args = JSON.parse(argsJson);
  } catch (e) {
    if (e instanceof SyntaxError) throw new ToolError('invalid-args', `arguments are not JSON: ${e.message}`);
    // Not a syntax error: the engine ran out of the call's memory (the text is too long).
    throw new ToolError('execution-failed', `cannot parse the arguments: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    throw new ToolError('invalid-args', 'arguments must be a JSON object');
  }
  for (const key of Object.keys(args)) {
    if (key !== 'text') throw new ToolError('invalid-args', `unknown field \`${key}\`, expected \`text\``);
  }
  if (!('text' in args)) throw new ToolError('invalid-args', 'missing field `text`');
  if (typeof args.text !== 'string') {
    throw new ToolError('invalid-args', `text: expected a string, got ${args.text === null ? 'null' : typeof args.text}`);
  }
  return args;
}

const tools = {
  word_count: {
    spec: {
      name: 'word_count',
      description: 'Counts the words, lines and characters (Unicode code points) of a text.',
      inputSchema: JSON.stringify(inputSchema),
      outputSchema: JSON.stringify(outputSchema),
      annotations: { readOnly: true, destructive: false, idempotent: true, openWorld: false },
    },
    run: (args) => wordCount(args.text),
  },
};

/** The exported `chitin:tool/tool@0.1.0` interface. */
export const tool = {
  specs() {
    return Object.values(tools).map((t) => t.spec);
  },

  call(name, argsJson) {
    const t = tools[name];
    if (t === undefined) {
      throw new ToolError('not-found', `no tool \`${name}\`; this component carries: ${Object.keys(tools).join(', ')}`);
    }
    return JSON.stringify(t.run(parseArgs(argsJson)));
  },
};
