/**
 * The reason an operator gives for an action (a decision, a revocation, an erasure): the
 * database records it with the role name, 1 to 2000 characters.
 */
export function ReasonField({
  id,
  label,
  value,
  onChange,
  disabled,
  testId,
}: {
  id: string;
  label: string;
  value: string;
  onChange: (value: string) => void;
  disabled?: boolean;
  testId: string;
}) {
  return (
    <>
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        value={value}
        onChange={(e) => onChange(e.target.value)}
        rows={2}
        maxLength={2000}
        disabled={disabled}
        data-testid={testId}
      />
    </>
  );
}
