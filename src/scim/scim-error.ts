/**
 * SCIM errors (RFC 7644 §3.12): `status` as a string, and a `scimType` where the RFC names one.
 * Thrown by the SCIM modules and turned into the body by the SCIM routes.
 */
export type ScimType = 'uniqueness' | 'invalidFilter' | 'invalidPath' | 'invalidValue' | 'mutability' | 'noTarget' | 'invalidSyntax' | 'tooMany';

export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';

export class ScimError extends Error {
  readonly status: number;
  readonly scimType: ScimType | undefined;

  constructor(status: number, detail: string, scimType?: ScimType) {
    super(detail);
    this.status = status;
    this.scimType = scimType;
  }

  body(): { schemas: string[]; status: string; scimType?: ScimType; detail: string } {
    return { schemas: [ERROR_SCHEMA], status: String(this.status), ...(this.scimType !== undefined ? { scimType: this.scimType } : {}), detail: this.message };
  }
}
