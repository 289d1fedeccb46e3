/** What each plan allows. New users are on `free`. */
export const plans = {
  free: { midCallTools: 5 },
  pro: { midCallTools: 50 },
} as const satisfies Record<string, { midCallTools: number }>;

export type Plan = keyof typeof plans;
