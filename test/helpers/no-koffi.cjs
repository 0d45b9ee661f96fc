// Preloaded (node --require) into an engine child: koffi will not load, as on a host without its
// prebuilt binary, so the child takes its fallback (Node's dgram for UDP and the probe, Node's
// sockets for the TCP receiver's reads).
const Module = require('node:module');
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === 'koffi') throw new Error('koffi hidden by test/helpers/no-koffi.cjs');
  return load.call(this, request, ...rest);
};
