/**
 * Deterministic sample directories: the demo organization behind the README's
 * curl examples, and organizations of any size for benchmarks.
 */

const FIRSTNAMES = [
  'Anna',
  'Ben',
  'Chloé',
  'David',
  'Élodie',
  'Fatima',
  'Görkem',
  'Hana',
  'Ignacio',
  'Jürgen',
  'Kateřina',
  'Léa',
  'Mateo',
  'Nuno',
  'Olga',
  'Paweł',
  'Quentin',
  'Rūta',
  'Søren',
  'Tomás',
  'Ulla',
  'Vincent',
  'Wen',
  'Xavier',
  'Yusuf',
  'Zoë',
];
const LASTNAMES = [
  'Müller',
  'Schmidt',
  'Dubois',
  'García',
  'Rossi',
  'Nowak',
  'Jensen',
  'Novák',
  'Öztürk',
  'Silva',
  'Smith',
  'Łukasiewicz',
  'Ng',
  'Johansson',
  'Brown',
  'Ferreira',
  'Kowalski',
  'Lefèvre',
  'Martínez',
  'Bianchi',
  "O'Brien",
  'Van der Berg',
];

/** A small pseudo-random generator, so the same seed always gives the same directory. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface SampleOptions {
  orgId: string;
  users: number;
  /** Share of external users (0–1). */
  externalShare: number;
  /** Share of pending users (0–1). */
  pendingShare: number;
  /** Rooms to create, each with its member count. */
  rooms: { id: string; members: number }[];
  externalSignatories: boolean;
  seed: number;
}

/** One organization in the import-file format (contract section 6). */
export function sampleOrganization(options: SampleOptions): Record<string, unknown> {
  const random = seededRandom(options.seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const users = [];
  for (let i = 0; i < options.users; i++) {
    const firstname = random() < 0.02 ? null : pick(FIRSTNAMES);
    const lastname = random() < 0.02 ? null : pick(LASTNAMES);
    const local = `${(firstname ?? 'user').toLowerCase()}.${(lastname ?? 'x').toLowerCase()}`.normalize('NFKD').replace(/[^a-z.]/g, '');
    const external = random() < options.externalShare;
    users.push({
      id: `u${i}`,
      firstname,
      lastname,
      email: `${local}.${i}@${external ? 'partner' : options.orgId}.example`,
      external,
      status: random() < options.pendingShare ? 'pending' : 'active',
    });
  }
  const rooms = options.rooms.map((room) => {
    const members = new Set<string>();
    const wanted = Math.min(room.members, options.users);
    while (members.size < wanted) members.add(`u${Math.floor(random() * options.users)}`);
    return { id: room.id, name: room.id, members: [...members] };
  });
  return {
    id: options.orgId,
    name: `${options.orgId} (sample)`,
    settings: { externalSignatories: options.externalSignatories },
    users,
    rooms,
  };
}

export const DEMO_USERNAME = 'demo';
export const DEMO_PASSWORD = 'demo-password';

/** The demo directory: organization "demo", room "board", credential demo / demo-password. */
export function demoDirectory(): Record<string, unknown> {
  return {
    organizations: [
      sampleOrganization({
        orgId: 'demo',
        users: 250,
        externalShare: 0.1,
        pendingShare: 0.15,
        rooms: [
          { id: 'board', members: 12 },
          { id: 'contracts', members: 40 },
        ],
        externalSignatories: true,
        seed: 42,
      }),
    ],
    credentials: [{ username: DEMO_USERNAME, password: DEMO_PASSWORD, organizations: ['demo'] }],
  };
}
