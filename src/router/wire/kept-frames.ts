/**
 * The frames relayed messages arrived in. The call's machine passes messages on as their bytes
 * (`wire`, the protobuf message); the HTTP/2 transport remembers the frame (prefix and message)
 * each one came in, so it writes that frame on unchanged instead of framing the bytes again. Kept
 * weakly: a message nobody holds any more takes its frame with it.
 */
const frames = new WeakMap<Buffer, Buffer>();

/** Remembers that `message` arrived framed as `frame`. */
export function keepFrame(message: Buffer, frame: Buffer): void {
  frames.set(message, frame);
}

/** The frame `message` arrived in, if the transport kept it. */
export function keptFrame(message: Buffer): Buffer | undefined {
  return frames.get(message);
}
