/** A labelled search box (role searchbox) that reports every keystroke; the caller debounces. */
export function SearchField({ id, label, value, onInput }: { id: string; label: string; value: string; onInput: (value: string) => void }) {
  return (
    <div class="field grow">
      <label for={id}>{label}</label>
      <input
        id={id}
        type="search"
        autocomplete="off"
        spellcheck={false}
        placeholder={label}
        value={value}
        onInput={(event) => onInput(event.currentTarget.value)}
      />
    </div>
  );
}
