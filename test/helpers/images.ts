import { crc32 } from 'node:zlib';
import sharp from 'sharp';

/** The width, height and mean brightness (0–255) of regions of a PNG. */
export async function inspectPng(png: Buffer): Promise<{ width: number; height: number; meanOf(top: number, bottom: number): number }> {
  const { data, info } = await sharp(png).greyscale().raw().toBuffer({ resolveWithObject: true });
  return {
    width: info.width,
    height: info.height,
    meanOf(top: number, bottom: number) {
      const from = Math.floor(top * info.height) * info.width;
      const to = Math.floor(bottom * info.height) * info.width;
      let sum = 0;
      for (let i = from; i < to; i++) sum += data[i]!;
      return sum / Math.max(1, to - from);
    },
  };
}

/** A solid-colour image of the given type. */
export function solidImage(width: number, height: number, format: 'png' | 'jpeg', grey = 0): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: grey, g: grey, b: grey } } })
    [format]()
    .toBuffer();
}

/** A PNG whose header claims the given size, with no real image data behind it. */
export function pngHeaderOnly(width: number, height: number): Buffer {
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.writeUInt8(8, 8); // bit depth
  ihdr.writeUInt8(2, 9); // RGB
  return Buffer.concat([
    signature,
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', Buffer.from([0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01])),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

function pngChunk(type: string, data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([length, body, crc]);
}
