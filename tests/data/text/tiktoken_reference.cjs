// Prints the GPT-2 token ids that tiktoken (the npm package) gives the text
// of a UTF-8 file, space-separated: the whole text on the first line, then
// each of its lines (split at "\n", without it) on a line of its own. Without
// special tokens, as tiktoken's encode_ordinary.
// Usage: node tiktoken_reference.cjs NODE_MODULES_DIR TEXT_FILE
const path = require("path");
const fs = require("fs");
const { get_encoding } = require(path.resolve(process.argv[2], "tiktoken"));
const enc = get_encoding("gpt2");
const text = fs.readFileSync(process.argv[3], "utf8");
const ids = (s) => Array.from(enc.encode_ordinary(s)).join(" ");
process.stdout.write([text, ...text.split("\n")].map(ids).join("\n") + "\n");
enc.free();
